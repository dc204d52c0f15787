"""The service's health, per component: database, embedder, job cluster, extraction jobs, LLM provider.

``health_report()`` returns the body and the HTTP status of ``GET /internal/v1/health``: 503 when
the database, the embedder or the cluster is down; the LLM being unreachable and extraction jobs
left running by a dead worker are reported, not fatal (conversations wait for the LLM; the queue
re-delivers a dead worker's job). Nothing here holds memory text.
"""

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from justai_core.ai_router import provider_status
from justai_memory.serving.embedded_model import SMOKE_TEST_WARNING

REQUIRED = ("database", "embedder", "cluster")
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
    from memories.services.embeddings import active_embedder

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
    if not status["ok"]:
        status["hint"] = LLM_HINT.format(url=status.get("base_url", "(not configured)"))
    elif settings.AI_MEMORY_SMOKE_MODEL and status.get("provider") == "embedded":
        status["hint"] = SMOKE_TEST_WARNING
    return status


def health_report() -> tuple[dict, int]:
    """({"status": "ok" | "unavailable", "components": {...}}, 200 | 503)."""
    database = database_status()
    components = {
        "database": database,
        "embedder": embedder_status(database_ok=database["ok"]),
        "cluster": cluster_status(database_ok=database["ok"]),
        "extraction": extraction_status(database_ok=database["ok"]),
        "llm": llm_status(database_ok=database["ok"]),
    }
    ok = all(components[name]["ok"] for name in REQUIRED)
    return {"status": "ok" if ok else "unavailable", "components": components}, 200 if ok else 503
