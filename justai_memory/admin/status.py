"""The admin's status page: the health report, extractions that need attention, consolidation, three charts.

The components come from ``justai_memory.serving.health`` (the same code as ``GET /internal/v1/health``);
the charts are SVG drawn here on the server (no script, nothing from another host). Nothing on the
page is memory text: counts, dates, ids and the text-free extraction errors.
"""

from dataclasses import dataclass
from datetime import date, timedelta

from django.conf import settings
from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from justai_core.ai_router import TOO_SLOW_MARK
from justai_memory.serving import embedded_model
from justai_memory.serving.health import health_report
from memories.admin.filters import label_name
from memories.models import ConsolidationRun, Memory, Provenance, RecallDay
from transcripts.models import Conversation, ExtractionStatus
from transcripts.selectors import extraction_retries_scheduled

CHART_DAYS = 30
ATTENTION = (
    ExtractionStatus.FAILED,
    ExtractionStatus.WAITING_MODEL,
    ExtractionStatus.WAITING_LOCAL,
    ExtractionStatus.QUEUED,
)
WAITING = (ExtractionStatus.WAITING_MODEL, ExtractionStatus.WAITING_LOCAL)
LEARNT_WITHIN = timedelta(days=1)  # conversations ended in this long and nothing learnt: the page says so
# Colours that stay apart for the colour-blind (Okabe-Ito), one per series.
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9"]


@dataclass
class Chart:
    title: str
    svg: SafeString
    legend: list[tuple[str, str, int]]  # (colour, name, total)


def _days(today: date, n: int = CHART_DAYS) -> list[date]:
    return [today - timedelta(days=n - 1 - i) for i in range(n)]


def bar_chart(days: list[date], series: dict[str, list[int]], *, label: str, running: bool = False) -> Chart:
    """Stacked bars, one per day, as an SVG element with a title per bar (the browser's tooltip).

    The legend gives each series' total: the sum of its days, or for a ``running`` total its last day.
    """
    width, height, left, bottom, top = 400, 170, 30, 22, 8
    top_value = max([sum(values) for values in zip(*series.values(), strict=True)] or [0]) or 1
    step = (width - left) / len(days)
    bar = max(step - 2, 1)
    scale = (height - bottom - top) / top_value
    parts = []
    for i, day in enumerate(days):
        y = height - bottom
        x = left + i * step
        tip = ", ".join(f"{name} {values[i]}" for name, values in series.items())
        for colour, values in zip(COLOURS, series.values(), strict=False):
            h = values[i] * scale
            if h:
                y -= h
                parts.append(
                    format_html(
                        '<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}: {}</title></rect>',
                        f"{x:.1f}",
                        f"{y:.1f}",
                        f"{bar:.1f}",
                        f"{h:.1f}",
                        colour,
                        date_format(day, "SHORT_DATE_FORMAT"),
                        tip,
                    )
                )
    # The first date starts at the first bar, the last ends at the chart's edge: centred, they were cut off.
    ticks = [(days[0], left, "start"), (days[len(days) // 2], left + (len(days) // 2) * step + bar / 2, "middle")]
    ticks.append((days[-1], width, "end"))
    axis = format_html_join(
        "",
        '<text x="{}" y="{}" font-size="11" text-anchor="{}" fill="currentColor">{}</text>',
        ((f"{x:.1f}", height - 6, anchor, date_format(d, "SHORT_DATE_FORMAT")) for d, x, anchor in ticks),
    )
    svg = format_html(
        '<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{label}" class="status-chart">'
        '<line x1="{l}" y1="{b}" x2="{w}" y2="{b}" stroke="#999"/>'
        '<text x="{lt}" y="{tt}" font-size="10" text-anchor="end" fill="currentColor">{top}</text>'
        '<text x="{lt}" y="{b}" font-size="10" text-anchor="end" fill="currentColor">0</text>'
        "{bars}{axis}</svg>",
        w=width,
        h=height,
        label=label,
        l=left,
        b=height - bottom,
        lt=left - 4,
        tt=top + 10,
        top=top_value,
        bars=SafeString("".join(parts)),
        axis=axis,
    )
    legend = [
        (colour, name, values[-1] if running else sum(values))
        for colour, (name, values) in zip(COLOURS, series.items(), strict=False)
    ]
    return Chart(title=label, svg=svg, legend=legend)


def _per_day(rows, days: list[date], key: str, names: dict[str, str]) -> dict[str, list[int]]:
    index = {d: i for i, d in enumerate(days)}
    series = {name: [0] * len(days) for name in names.values()}
    for row in rows:
        if row["day"] in index and row[key] in names:
            series[names[row[key]]][index[row["day"]]] += row["n"]
    return series


def memories_chart(days: list[date]) -> Chart:
    """How many memories there were at the end of each day, stacked by label (forgotten ones are gone)."""
    tz = timezone.get_current_timezone()
    names = {value: label_name(value) for value in Provenance.values}
    rows = (
        Memory.objects.annotate(day=TruncDate("created_at", tzinfo=tz))
        .values("day", "provenance")
        .annotate(n=Count("id"))
        .order_by()
    )
    rows = list(rows)
    series = _per_day(rows, days, "provenance", names)
    for value, name in names.items():
        total = sum(r["n"] for r in rows if r["provenance"] == value and r["day"] < days[0])
        for i, n in enumerate(series[name]):
            total += n
            series[name][i] = total
    return bar_chart(days, series, label=_("Memories at the end of each day, by label"), running=True)


def recalls_chart(days: list[date]) -> Chart:
    """Recalls per day (RecallDay: the household's TIME_ZONE days; the admin's preview does not count)."""
    counts = dict(RecallDay.objects.filter(day__range=(days[0], days[-1])).values_list("day", "count"))
    series = {_("recalls"): [counts.get(day, 0) for day in days]}
    return bar_chart(days, series, label=_("Recalls per day"))


def extractions_chart(days: list[date]) -> Chart:
    """Ended conversations per day of their end, by how their extraction went."""
    tz = timezone.get_current_timezone()
    outcomes = [
        ExtractionStatus.DONE,
        ExtractionStatus.SKIPPED,
        ExtractionStatus.FAILED,
        ExtractionStatus.WAITING_MODEL,
        ExtractionStatus.WAITING_LOCAL,
        ExtractionStatus.QUEUED,
        ExtractionStatus.RUNNING,
    ]
    names = {s.value: str(s.label) for s in outcomes}
    rows = (
        Conversation.objects.filter(ended_at__isnull=False)
        .annotate(day=TruncDate("ended_at", tzinfo=tz))
        .values("day", "extraction_status")
        .annotate(n=Count("id"))
        .order_by()
    )
    series = _per_day(rows, days, "extraction_status", names)
    return bar_chart(days, series, label=_("Conversations ended each day, by extraction outcome"))


def _advice(conversation: Conversation, *, llm: dict, cluster_ok: bool, next_retry) -> tuple[str, str]:
    """Why a conversation's extraction fails or waits, and what to do about it (text-free: the stored reason
    names classes, URLs and figures, never what was said)."""
    status, error = conversation.extraction_status, conversation.extraction_error
    if status == ExtractionStatus.WAITING_MODEL:
        why = error or _("The language model did not answer.")
        what = _(
            "Start the language model at %(url)s, or set AI_MEMORY_PROVIDER, AI_MEMORY_BASE_URL and "
            "AI_MEMORY_MODEL. It is read within a minute of the model answering."
        ) % {"url": llm.get("base_url") or "-"}
        return why, what
    if status == ExtractionStatus.WAITING_LOCAL:
        why = _("The language model runs in the cloud, and personal memories may not be sent there.")
        what = _("Set a local model (AI_MEMORY_PROVIDER), or allow personal memories to the cloud under Settings.")
        return why, what
    if status == ExtractionStatus.QUEUED:
        if not cluster_ok:
            return _("It waits for the job cluster."), _("Start the job cluster (scripts/run starts it).")
        return _("It waits for its turn in the job queue."), _("Nothing: it runs shortly.")
    what = []
    if TOO_SLOW_MARK in error:
        what.append(_("Use a faster model (docs/extraction.md), or raise AI_TIMEOUT."))
    if next_retry is not None:
        what.append(
            _("It is tried again at %(time)s.")
            % {"time": date_format(timezone.localtime(next_retry), "SHORT_DATETIME_FORMAT")}
        )
    elif conversation.extraction_attempts >= settings.EXTRACTION_MAX_ATTEMPTS:
        what.append(_("No attempts are left: remove the cause, then use “Re-run extraction” on the conversation."))
    return error or _("No reason was recorded."), " ".join(what) or _("Use “Re-run extraction” on the conversation.")


def extractions_needing_attention(limit: int = 20, *, llm: dict | None = None, cluster_ok: bool = True) -> list[dict]:
    """Failed, waiting and queued extractions, oldest end first, with the next scheduled retry, why and what to do."""
    retries = extraction_retries_scheduled()
    rows = (
        Conversation.objects.filter(extraction_status__in=ATTENTION, ended_at__isnull=False)
        .select_related("room", "speaker")
        .order_by("ended_at", "pk")[:limit]
    )
    listed = []
    for conversation in rows:
        next_retry = retries.get(conversation.pk)
        why, what = _advice(conversation, llm=llm or {}, cluster_ok=cluster_ok, next_retry=next_retry)
        listed.append({"conversation": conversation, "next_retry": next_retry, "why": why, "what": what})
    return listed


def problems(components: dict, *, now=None) -> list[str]:
    """What keeps the overall state from "healthy", beside a required component that is down: ended
    conversations that wait or failed, a model that does not answer, nothing learnt for a day while
    conversations ended."""
    now = now or timezone.now()
    found = []
    for name in ("database", "embedder", "cluster"):
        if not components[name]["ok"]:
            found.append(_("A required part does not work: %(part)s.") % {"part": name})
    if not components["database"]["ok"]:
        return found
    if not components["llm"]["ok"]:
        found.append(_("The language model does not answer, so no conversation can be read."))
    elif settings.AI_MEMORY_SMOKE_MODEL and components["llm"].get("provider") == "embedded":
        found.append(
            _(
                "The embedded model is the bundled smoke-test model: conversations are read but nothing is "
                "learnt. Run manage.py fetch_model (or set AI_MEMORY_MODEL_FILE) for a real one."
            )
        )
    if not components["extraction"]["ok"] and components["extraction"].get("stalled"):
        found.append(components["extraction"]["error"])
    ended = Conversation.objects.filter(ended_at__isnull=False)
    waiting = ended.filter(extraction_status__in=WAITING).count()
    stuck = ended.filter(
        extraction_status=ExtractionStatus.QUEUED,
        ended_at__lt=now - timedelta(minutes=settings.EXTRACTION_LOST_AFTER_MINUTES),
    ).count()
    if waiting + stuck:
        found.append(
            ngettext(
                "%(n)s ended conversation waits to be read.",
                "%(n)s ended conversations wait to be read.",
                waiting + stuck,
            )
            % {"n": waiting + stuck}
        )
    failed = ended.filter(extraction_status=ExtractionStatus.FAILED).count()
    if failed:
        found.append(
            ngettext("%(n)s conversation could not be read.", "%(n)s conversations could not be read.", failed)
            % {"n": failed}
        )
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
        found.append(
            ngettext(
                "Nothing was learnt in the last 24 hours, although %(n)s conversation ended.",
                "Nothing was learnt in the last 24 hours, although %(n)s conversations ended.",
                n,
            )
            % {"n": n}
        )
    return found


def model_file(llm: dict) -> str:
    """The embedded model's file name (and where it comes from), or "" for another provider."""
    if llm.get("provider") != "embedded":
        return ""
    try:
        choice = embedded_model.model_choice(model_file=settings.AI_MEMORY_MODEL_FILE, data_dir=settings.DATA_DIR)
    except embedded_model.ModelUnavailable as exc:
        return str(exc)
    sources = {
        "AI_MEMORY_MODEL_FILE": "AI_MEMORY_MODEL_FILE",
        "fetched": "manage.py fetch_model",
        "bundled": _("bundled"),
    }
    return f"{choice.path.name} ({sources.get(choice.source, choice.source)})"


def admin_status() -> dict:
    """Everything the status page shows."""
    report, _status = health_report()
    components = report["components"]
    days = _days(timezone.localdate())
    found = problems(components)
    return {
        "ok": report["status"] == "ok" and not found,
        "problems": found,
        "components": components,
        "model_file": model_file(components["llm"]),
        "extractions": extractions_needing_attention(llm=components["llm"], cluster_ok=components["cluster"]["ok"]),
        "extraction_counts": {
            str(ExtractionStatus(s).label): n
            for s, n in Conversation.objects.filter(extraction_status__in=ATTENTION)
            .values_list("extraction_status")
            .annotate(n=Count("id"))
            .order_by()
        },
        "consolidation": ConsolidationRun.objects.order_by("-started_at").first(),
        "charts": [memories_chart(days), recalls_chart(days), extractions_chart(days)],
    }
