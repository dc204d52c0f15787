"""The service's health, per component (database, embedder, job cluster, extraction jobs, LLM provider), and
the one verdict on it that ``GET /internal/v1/health``, ``/admin/status.json`` and the admin's status page show.

``health_report()`` returns the body and the HTTP status: "unavailable" (503) when the database, the
embedder or the cluster is down; "attention" (200) with its reasons when the service runs but something
keeps it from learning (the LLM does not answer, conversations wait or failed, a worker died, nothing
learnt in a day while conversations ended); else "ok". Nothing here holds memory text.
"""

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from justai_core.ai_router import provider_status
from justai_memory.serving import embedded_model

REQUIRED = ("database", "embedder", "cluster")
PARTS = {
    "database": gettext_lazy("the database"),
    "embedder": gettext_lazy("the embedder (it turns text into searchable vectors)"),
    "cluster": gettext_lazy("the job cluster"),
}
LEARNT_WITHIN = timedelta(days=1)  # conversations ended in this long and nothing learnt: a reason for attention
HEARTBEAT_MAX_AGE = timedelta(minutes=1)
DATABASE_CHECK_SECONDS = 1.0  # a pooled connection is made in milliseconds while the database is up


def _error(exc: Exception) -> str:
    """The exception's class and the first line of its message (PostgreSQL's messages name no data here)."""
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__


def database_status() -> dict:
    """``SELECT 1`` answers. With a pool, a connection is waited for DATABASE_CHECK_SECONDS at most, not the pool's
    timeout: while the database is down or restarting the pool cannot connect, and the check says so at once."""
    try:
        pool = connection.pool
        if pool is None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
        else:
            pool.open()  # as Django does before each connection it takes (a no-op once open)
            with pool.connection(timeout=DATABASE_CHECK_SECONDS) as conn:
                conn.execute("SELECT 1")
    except Exception as exc:  # unreachable, pool timeout, restarting server: reported, never raised
        connection.close()
        return {"ok": False, "error": _error(exc)}
    return {"ok": True}


def embedder_status(*, database_ok: bool) -> dict:
    """The configured embedder loads (and, with the database up, matches the stored vectors)."""
    from memories.embedders import get_embedder
    from memories.embedding_space import active_embedder

    try:
        embedder = active_embedder() if database_ok else get_embedder()
    except Exception as exc:  # a mismatch (ImproperlyConfigured) or a model that does not load
        return {"ok": False, "error": _error(exc)}
    return {"ok": True, "name": embedder.name, "dim": embedder.dim}


def cluster_status(*, database_ok: bool) -> dict:
    """A django-q2 cluster saved its status (Stat, every 0.5 s into the "cluster" cache) less than a minute ago."""
    if not database_ok:
        return {"ok": False, "error": "unknown: the database is unavailable"}
    from django_q.status import Stat

    try:
        stats = Stat.get_all()
    except Exception as exc:  # e.g. the status table was never created (manage.py createcachetable)
        connection.close()
        return {"ok": False, "error": _error(exc)}
    ages = [(timezone.now() - stat.timestamp).total_seconds() for stat in stats]
    fresh = [age for age in ages if age < HEARTBEAT_MAX_AGE.total_seconds()]
    if not fresh:
        return {"ok": False, "clusters": 0, "error": "no django-q2 cluster heartbeat in the last minute"}
    return {"ok": True, "clusters": len(fresh), "heartbeat_age_seconds": round(min(fresh), 1)}


def extraction_status(*, database_ok: bool) -> dict:
    """Conversations whose extraction is ``running``, and those of them no live run holds (its worker died).

    A run holds its conversation's session-level advisory lock (transcripts.services.extraction), which
    PostgreSQL releases when the run's connection ends: ``running`` without the lock is a run that died.
    """
    if not database_ok:
        return {"ok": False, "error": "unknown: the database is unavailable"}
    from memories.locks import LockId, advisory_locks_held
    from transcripts.models import Conversation, ExtractionStatus

    try:
        running = list(
            Conversation.objects.filter(extraction_status=ExtractionStatus.RUNNING).values_list("pk", flat=True)
        )
        held = advisory_locks_held(LockId.EXTRACTION, keys=running)
    except Exception as exc:
        connection.close()
        return {"ok": False, "error": _error(exc)}
    stalled = sorted(pk for pk in running if pk & 0x7FFFFFFF not in held)
    if stalled:
        return {
            "ok": False,
            "running": len(running),
            "stalled": stalled,
            "error": f"{len(stalled)} extraction(s) left running by a worker that died; "
            f"the queue runs them again {settings.Q_CLUSTER['retry']} s after they were taken",
        }
    return {"ok": True, "running": len(running), "stalled": []}


LLM_HINT = (
    "conversations wait for the model (extracted once it answers): start the server at {url}, or set "
    "AI_MEMORY_PROVIDER (embedded, ollama, llamacpp, vllm, lmstudio, openai, gemini, custom), AI_MEMORY_BASE_URL "
    "and AI_MEMORY_MODEL (docs/configuration.md)"
)


def llm_status(*, database_ok: bool) -> dict:
    """The memory role's provider (``provider_status``), how many conversations wait for it, and what to set when it is down."""
    status = provider_status("memory")
    if database_ok:
        from transcripts.models import Conversation, ExtractionStatus

        try:
            status["conversations_waiting"] = Conversation.objects.filter(
                extraction_status=ExtractionStatus.WAITING_MODEL
            ).count()
        except Exception as exc:  # reported, never raised
            connection.close()
            status["conversations_waiting"] = None
            status.setdefault("error", _error(exc))
    if status.get("provider") == "embedded":
        status.update(embedded_model_named())
    if not status["ok"]:
        status["hint"] = LLM_HINT.format(url=status.get("base_url", "(not configured)"))
    elif settings.AI_MEMORY_SMOKE_MODEL and status.get("provider") == "embedded":
        status["hint"] = embedded_model.SMOKE_TEST_WARNING
    return status


def embedded_model_named() -> dict:
    """The embedded model by its file (``model``) and where that comes from (``model_source``: AI_MEMORY_MODEL_FILE,
    fetched, bundled); its server lists it under another name, so ``model_listed`` says nothing and is left out."""
    try:
        choice = embedded_model.model_choice(model_file=settings.AI_MEMORY_MODEL_FILE, data_dir=settings.DATA_DIR)
    except embedded_model.ModelUnavailable as exc:
        return {"model": None, "model_source": None, "model_listed": None, "error": str(exc)}
    return {"model": choice.path.name, "model_source": choice.source, "model_listed": None}


def attention_reasons(components: dict, *, now=None) -> list[dict]:
    """Why the service is not "ok", each ``{"code", "text"}`` (the text in the active language): a required part
    that is down, a model that does not answer, a dead worker's extraction, ended conversations that wait or
    failed, nothing learnt for a day while conversations ended."""
    reasons = [
        {"code": f"{name}_down", "text": _("A required part does not work: %(part)s.") % {"part": PARTS[name]}}
        for name in REQUIRED
        if not components[name]["ok"]
    ]
    if not components["database"]["ok"]:
        return reasons
    if not components["llm"]["ok"]:
        reasons.append(
            {"code": "llm_down", "text": _("The language model does not answer, so no conversation can be read.")}
        )
    elif settings.AI_MEMORY_SMOKE_MODEL and components["llm"].get("provider") == "embedded":
        text = _(
            "The embedded model is the bundled smoke-test model: conversations are read but nothing is "
            "learnt. Run manage.py fetch_model (or set AI_MEMORY_MODEL_FILE) for a real one."
        )
        reasons.append({"code": "smoke_model", "text": text})
    if components["extraction"].get("stalled"):
        n = len(components["extraction"]["stalled"])
        text = ngettext(
            "%(n)s conversation was left half-read by a worker that stopped; it is read again shortly.",
            "%(n)s conversations were left half-read by a worker that stopped; they are read again shortly.",
            n,
        )
        reasons.append({"code": "extraction_stalled", "text": text % {"n": n}})
    try:
        reasons += _conversation_reasons(now or timezone.now())
    except Exception as exc:  # reported, never raised
        connection.close()
        reasons.append({"code": "unknown", "text": _error(exc)})
    return reasons


def _conversation_reasons(now) -> list[dict]:
    from transcripts.models import Conversation, ExtractionStatus

    reasons = []
    ended = Conversation.objects.filter(ended_at__isnull=False)
    waiting = ended.filter(extraction_status__in=(ExtractionStatus.WAITING_MODEL, ExtractionStatus.WAITING_LOCAL))
    stuck = ended.filter(
        extraction_status=ExtractionStatus.QUEUED,
        ended_at__lt=now - timedelta(minutes=settings.EXTRACTION_LOST_AFTER_MINUTES),
    )
    if n := waiting.count() + stuck.count():
        text = ngettext("%(n)s ended conversation waits to be read.", "%(n)s ended conversations wait to be read.", n)
        reasons.append({"code": "conversations_waiting", "text": text % {"n": n}})
    if n := ended.filter(extraction_status=ExtractionStatus.FAILED).count():
        text = ngettext("%(n)s conversation could not be read.", "%(n)s conversations could not be read.", n)
        reasons.append({"code": "conversations_failed", "text": text % {"n": n}})
    since = now - LEARNT_WITHIN
    recent = ended.filter(ended_at__gte=since).exclude(
        extraction_status__in=(ExtractionStatus.SKIPPED, ExtractionStatus.BLOCKED)
    )
    learnt = (
        Conversation.objects.filter(extraction_status=ExtractionStatus.DONE, extracted_at__gte=since)
        .exclude(extraction_stats__memory_ids=[])
        .exclude(extraction_stats__memory_ids__isnull=True)
        .exists()
    )
    if not learnt and (n := recent.count()):
        text = ngettext(
            "Nothing was learnt in the last 24 hours, although %(n)s conversation ended.",
            "Nothing was learnt in the last 24 hours, although %(n)s conversations ended.",
            n,
        )
        reasons.append({"code": "nothing_learnt", "text": text % {"n": n}})
    return reasons


def health_report() -> tuple[dict, int]:
    """({"status": "ok" | "attention" | "unavailable", "reasons": [...], "components": {...}}, 200 | 503)."""
    database = database_status()
    components = {
        "database": database,
        "embedder": embedder_status(database_ok=database["ok"]),
        "cluster": cluster_status(database_ok=database["ok"]),
        "extraction": extraction_status(database_ok=database["ok"]),
        "llm": llm_status(database_ok=database["ok"]),
    }
    running = all(components[name]["ok"] for name in REQUIRED)
    reasons = attention_reasons(components)
    verdict = "unavailable" if not running else "attention" if reasons else "ok"
    return {"status": verdict, "reasons": reasons, "components": components}, 200 if running else 503
