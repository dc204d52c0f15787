"""A conversation's extraction in the household's words: its counts, and why it failed or waits and what to do."""

from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from justai_core import ai_router
from transcripts.models import ExtractionStatus
from transcripts.selectors import extraction_hint

# The extraction's counts in words (transcripts.services.extraction writes them); others show by their key.
STAT_WORDS = {
    "extracted": _("extracted"),
    "facts": _("facts"),
    "preferences": _("preferences"),
    "inferred": _("guessed"),
    "items_rejected": _("rejected"),
    "created": _("stored"),
    "merged": _("merged"),
    "skipped_forgotten": _("left out (forgotten)"),
    "repeats": _("repeated in the answer (stored once)"),
    "ungrounded": _("left out (nobody said it)"),
    "answer_tokens": _("tokens of the answer"),
    "llm_ms": _("language model (ms)"),
    "store_ms": _("storing (ms)"),
    "user_chars": _("characters said"),
    "wait_ms": _("waited (ms)"),
}


def stats_text(stats: dict) -> str:
    """The numeric extraction stats as 'name n, ...' in words (the stats hold counts, never memory text)."""
    return ", ".join(
        f"{STAT_WORDS.get(name, name)} {value}"
        for name, value in sorted((stats or {}).items())
        if isinstance(value, int | float) and not isinstance(value, bool)
    )


@dataclass(frozen=True)
class Advice:
    """Why a conversation's extraction fails or waits and what to do, for the household in the page's language;
    ``detail``, for the operator, is the stored reason and the settings (classes, URLs, figures: never what was said)."""

    why: str
    what: str
    detail: str


def folded(words: str, detail: str) -> str:
    """``words`` with ``detail`` folded away beneath ("Details for the operator"), as the admin shows reasons."""
    if not detail:
        return format_html("{}", words)
    return format_html(
        '{}<details class="operator-detail"><summary>{}</summary><pre style="white-space: pre-wrap">{}</pre></details>',
        words,
        gettext("Details for the operator"),
        detail,
    )


def extraction_advice(conversation, *, cluster_ok: bool = True, next_retry=None) -> Advice | None:
    """Why the extraction of ``conversation`` failed or waits, and what to do; None when it neither failed nor waits."""
    status, error = conversation.extraction_status, conversation.extraction_error
    detail = "\n".join(part for part in (error, extraction_hint(conversation=conversation)) if part)
    if status == ExtractionStatus.WAITING_MODEL:
        why = gettext("The language model does not answer, so this conversation waits to be read.")
        what = gettext(
            "Start the language model, or set one up as docs/extraction.md describes. The conversation is "
            "read within a minute of the model answering."
        )
        return Advice(why, what, detail)
    if status == ExtractionStatus.WAITING_LOCAL:
        why = gettext("The language model runs in the cloud, and personal memories may not be sent there.")
        what = gettext(
            "Set a local model (AI_MEMORY_PROVIDER), or allow personal memories to the cloud under Settings."
        )
        return Advice(why, what, detail)
    if status == ExtractionStatus.QUEUED:
        if not cluster_ok:
            return Advice(
                gettext("It waits for the job cluster."), gettext("Start the job cluster (scripts/run starts it)."), ""
            )
        return Advice(gettext("It waits for its turn in the job queue."), gettext("Nothing: it runs shortly."), "")
    if status != ExtractionStatus.FAILED:
        return None
    return Advice(_failure_words(error), _failure_remedy(conversation, next_retry=next_retry), detail)


def _failure_words(error: str) -> str:
    if ai_router.UNREACHABLE_MARK in error:
        return gettext("The language model did not answer.")
    if ai_router.TOO_SLOW_MARK in error:
        return gettext("The language model took too long to answer.")
    if error:
        return gettext("Reading the conversation failed.")
    return gettext("No reason was recorded.")


def _failure_remedy(conversation, *, next_retry) -> str:
    what = []
    if ai_router.TOO_SLOW_MARK in conversation.extraction_error:
        what.append(gettext("Use a faster model (docs/extraction.md), or raise AI_TIMEOUT."))
    if next_retry is not None:
        moment = date_format(timezone.localtime(next_retry), "SHORT_DATETIME_FORMAT")
        what.append(gettext("It is tried again at %(time)s.") % {"time": moment})
    elif conversation.extraction_attempts >= settings.EXTRACTION_MAX_ATTEMPTS:
        what.append(
            gettext("No attempts are left: remove the cause, then use “Re-run extraction” on the conversation.")
        )
    return " ".join(what) or gettext("Use “Re-run extraction” on the conversation.")
