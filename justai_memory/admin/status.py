"""The admin's status page: the health report, extractions that need attention, consolidation, three charts.

The components come from ``justai_memory.edge.health`` (the same code as ``GET /internal/v1/health``);
the charts are SVG drawn here on the server (no script, nothing from another host). Nothing on the
page is memory text: counts, dates, ids and the text-free extraction errors.
"""

from dataclasses import dataclass
from datetime import date, timedelta

from django.db.models import Count
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from justai_memory.edge.health import health_report
from memories.admin.filters import label_name
from memories.models import ConsolidationRun, Memory, Provenance, RecallDay
from transcripts.admin.extraction import extraction_advice
from transcripts.models import Conversation, ExtractionStatus
from transcripts.selectors import extraction_retries_scheduled

CHART_DAYS = 30
ATTENTION = (
    ExtractionStatus.FAILED,
    ExtractionStatus.WAITING_MODEL,
    ExtractionStatus.WAITING_LOCAL,
    ExtractionStatus.QUEUED,
)
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


def extractions_needing_attention(limit: int = 20, *, cluster_ok: bool = True) -> list[dict]:
    """Failed, waiting and queued extractions, oldest end first, with the next scheduled retry, why and what to do
    (in the household's words, the technical reason folded away: ``extraction_advice``)."""
    retries = extraction_retries_scheduled()
    rows = (
        Conversation.objects.filter(extraction_status__in=ATTENTION, ended_at__isnull=False)
        .select_related("room", "speaker")
        .order_by("ended_at", "pk")[:limit]
    )
    listed = []
    for conversation in rows:
        next_retry = retries.get(conversation.pk)
        advice = extraction_advice(conversation, cluster_ok=cluster_ok, next_retry=next_retry)
        listed.append({"conversation": conversation, "next_retry": next_retry, "advice": advice})
    return listed


def model_file(llm: dict) -> str:
    """The embedded model's file name (the health report's) and where it comes from, or "" for another provider."""
    if llm.get("provider") != "embedded":
        return ""
    if not llm.get("model"):
        return llm.get("error") or "-"
    sources = {
        "AI_MEMORY_MODEL_FILE": "AI_MEMORY_MODEL_FILE",
        "fetched": "manage.py fetch_model",
        "bundled": _("bundled"),
    }
    return f"{llm['model']} ({sources.get(llm['model_source'], llm['model_source'])})"


def admin_status() -> dict:
    """Everything the status page shows."""
    report, _status = health_report()
    components = report["components"]
    days = _days(timezone.localdate())
    return {
        "ok": report["status"] == "ok",  # the health report's verdict, its reasons below: one truth
        "problems": [reason["text"] for reason in report["reasons"]],
        "components": components,
        "model_file": model_file(components["llm"]),
        "extractions": extractions_needing_attention(cluster_ok=components["cluster"]["ok"]),
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
