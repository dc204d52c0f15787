"""The admin for transcripts: conversations with their turns (read-only), extraction status, re-running extraction."""

import json
from dataclasses import dataclass

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from justai_core import ai_router
from memories.admin.base import language_words, memory_link, when
from memories.admin.filters import label_name
from memories.models import Memory
from transcripts.models import Conversation, Event, ExtractionStatus, Sighting, Turn
from transcripts.selectors import conversation_speakers, extraction_hint, extraction_retries_scheduled
from transcripts.services import rerun
from transcripts.services.redaction import FORGOTTEN_MARKER
from transcripts.services.rerun import conversations_extract_rerun

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


def rerun_refusal_words(reason: str) -> str:
    """Why a re-run was refused, in the page's language (the service's reasons are English constants)."""
    words = {
        rerun.NOT_FOUND: _("no such conversation"),
        rerun.STILL_OPEN: _("still open: it is extracted once it has ended"),
        rerun.BLOCKED: _("speaker deleted: never extracted (it would become shared memories)"),
        rerun.WAITING_LOCAL: _(
            "waiting for a local model: set AI_MEMORY_* to a local provider, or allow personal memories to cloud models"
        ),
        rerun.BUSY: _("already queued or running"),
    }
    return str(words.get(reason, reason))


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


def conversation_names(ids) -> str:
    """Conversations by who and when (``Conversation.__str__``), as the messages about them name them."""
    found = {c.pk: str(c) for c in Conversation.objects.filter(pk__in=ids).select_related("speaker")}
    return "; ".join(found.get(pk, f"#{pk}") for pk in ids)


def memories_learned_from(conversations):
    """The memories the extraction of these conversations stored (their source) or merged into (their stats)."""
    ids = [
        pk
        for conversation in conversations
        for pk in (conversation.extraction_stats or {}).get("memory_ids", [])
        if isinstance(pk, int)
    ]
    sources = [f"conversation:{conversation.pk}" for conversation in conversations]
    return Memory.objects.filter(Q(source_ref__in=sources) | Q(pk__in=ids))


def deleting_conversations(delete_selected):
    """Django's ``delete_selected``, whose confirmation says how many memories were learned from them (they stay)."""

    def action(modeladmin, request, queryset):
        response = delete_selected(modeladmin, request, queryset)
        if response is not None and hasattr(response, "context_data"):
            response.context_data["memories_learned"] = memories_learned_from(list(queryset)).count()
        return response

    action.allowed_permissions = getattr(delete_selected, "allowed_permissions", ("delete",))
    action.short_description = getattr(delete_selected, "short_description", "")
    return action


class TurnInline(admin.TabularInline):
    model = Turn
    extra = 0
    can_delete = False
    fields = ["created_at", "role", "speaker", "said"]
    readonly_fields = fields

    @admin.display(description=_("text"))
    def said(self, obj):
        """The turn's text; a value redaction replaced reads as the page's word for "forgotten"."""
        return obj.text.replace(FORGOTTEN_MARKER, gettext("[forgotten]"))

    def get_queryset(self, request):
        # Each turn's place in its conversation ("Turn 1"), not its id in the table.
        position = Window(RowNumber(), partition_by=[F("conversation_id")], order_by=[F("created_at"), F("id")])
        return super().get_queryset(request).select_related("speaker").annotate(position=position)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class EndedFilter(admin.SimpleListFilter):
    title = _("ended")
    parameter_name = "ended"

    def lookups(self, request, model_admin):
        return [("yes", _("ended")), ("no", _("still open"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(ended_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(ended_at__isnull=True)
        return queryset


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    """Conversations are records of what was said: read-only, except for re-running their extraction."""

    # Few, narrow columns: the list fits a 1,366 px screen with the filters beside it.
    list_display = [
        "id",
        "started",
        "room",
        "speaker_or_unknown",
        "turn_count",
        "language_and_location",
        "extraction",
    ]
    list_filter = [
        "extraction_status",
        "model_location",
        "language",
        "room",
        ("speaker", admin.RelatedOnlyFieldListFilter),
        EndedFilter,
        "ended_by",
        "extraction_blocked",
        "started_at",
    ]
    list_select_related = ["room", "speaker"]
    date_hierarchy = "started_at"
    inlines = [TurnInline]
    actions = ["rerun_extraction"]
    change_form_template = "admin/transcripts/conversation/change_form.html"
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "room",
                    "speaker",
                    "who_spoke",
                    "language_name",
                    "model_location",
                    "started_at",
                    "ended_at",
                    "ended_by",
                ]
            },
        ),
        (_("What it taught the assistant"), {"fields": ["memories_made", "dropped_by_forget_blocks"]}),
        (
            _("Extraction"),
            {
                "fields": [
                    "extraction_status",
                    "next_retry",
                    "extraction_stats_pretty",
                    "extraction_attempts",
                    "extraction_reason",
                    "extraction_hint_text",
                    "extracted_at",
                    "never_extract",
                ]
            },
        ),
    ]
    # Nothing on the page is edited: every field shown is read-only.
    readonly_fields = [name for _, options in fieldsets for name in options["fields"]]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(turn_count=Count("turns"))

    def has_change_permission(self, request, obj=None):
        # No conversation is edited; the change permission only guards the re-run action.
        return obj is None and super().has_change_permission(request)

    def has_add_permission(self, request):
        return False

    @admin.display(description=_("speaker"), ordering="speaker__name")
    def speaker_or_unknown(self, obj):
        return obj.speaker or gettext("unknown")

    @admin.display(description=_("turns"), ordering="turn_count")
    def turn_count(self, obj):
        return obj.turn_count

    @admin.display(description=_("started · ended"), ordering="started_at")
    def started(self, obj):
        def local(moment):
            return date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT")

        ended = local(obj.ended_at) if obj.ended_at else gettext("still open")
        return format_html("{}<br><small>{}</small>", local(obj.started_at), ended)

    @admin.display(description=_("language · model"), ordering="language")
    def language_and_location(self, obj):
        return f"{language_words(obj.language)} · {obj.get_model_location_display()}"

    @admin.display(description=_("extraction"), ordering="extraction_status")
    def extraction(self, obj):
        return format_html(
            "{}<br><small>{}</small>", obj.get_extraction_status_display(), stats_text(obj.extraction_stats)
        )

    @admin.display(description=_("language"))
    def language_name(self, obj):
        return language_words(obj.language)

    @admin.display(description=_("never extract"))
    def never_extract(self, obj):
        """In words, without Django's red "no" icon, which read as a warning on every conversation."""
        if obj.extraction_blocked:
            return gettext("Yes: its speaker was deleted, so it must not become shared memories.")
        return gettext("No")

    @admin.display(description=_("why"))
    def extraction_reason(self, obj):
        """Why it failed or waits, in words; the stored reason (and the settings) folded away for the operator."""
        advice = extraction_advice(obj, next_retry=extraction_retries_scheduled().get(obj.pk))
        if advice is None:
            return folded("-", obj.extraction_error)
        return folded(advice.why, advice.detail)

    @admin.display(description=_("what to do"))
    def extraction_hint_text(self, obj):
        advice = extraction_advice(obj, next_retry=extraction_retries_scheduled().get(obj.pk))
        return advice.what if advice else "-"

    @admin.display(description=_("who spoke"))
    def who_spoke(self, obj):
        return ", ".join(p.name for p in conversation_speakers(conversation=obj)) or gettext("unknown speaker")

    @admin.display(description=_("next retry"))
    def next_retry(self, obj):
        moment = extraction_retries_scheduled().get(obj.pk)
        return when(moment) if moment else "-"

    @admin.display(description=_("memories it made"))
    def memories_made(self, obj):
        """The memories this conversation's extraction stored or merged into (their text: for who may view memories)."""
        found = (
            memories_learned_from([obj])
            .only("pk", "content", "provenance", "scope", "owner", "room")
            .select_related("owner", "room")
            .order_by("pk")
        )
        if not found:
            return "-"
        return format_html_join(
            "",
            '<div class="conversation-memory">{}: {} <small>({} · {})</small></div>',
            (
                (memory_link(m.pk), Truncator(m.content).chars(140), label_name(m.provenance), m.get_scope_display())
                for m in found
            ),
        )

    @admin.display(description=_("left out by forget blocks"))
    def dropped_by_forget_blocks(self, obj):
        """How many items a forget block kept out (a count: the forgotten text exists nowhere)."""
        n = (obj.extraction_stats or {}).get("skipped_forgotten", 0)
        if not n:
            return gettext("none")
        return ngettext(
            "%(n)d item was not stored: it had been forgotten.",
            "%(n)d items were not stored: they had been forgotten.",
            n,
        ) % {"n": n}

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if request.user.has_perm("memories.view_memory"):
            return fieldsets
        return [(name, {**o, "fields": [f for f in o["fields"] if f != "memories_made"]}) for name, o in fieldsets]

    def get_actions(self, request):
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            func, name, description = actions["delete_selected"]
            actions["delete_selected"] = (deleting_conversations(func), name, description)
        return actions

    def delete_view(self, request, object_id, extra_context=None):
        conversation = Conversation.objects.filter(pk=object_id).first() if str(object_id).isdigit() else None
        learned = memories_learned_from([conversation]).count() if conversation else 0
        return super().delete_view(request, object_id, {"memories_learned": learned, **(extra_context or {})})

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<int:conversation_id>/rerun/",
                self.admin_site.admin_view(self.rerun_view),
                name="{}_{}_rerun".format(*info),
            ),
            *super().get_urls(),
        ]

    def render_change_form(self, request, context, *args, **kwargs):
        context["may_rerun"] = super().has_change_permission(request)
        return super().render_change_form(request, context, *args, **kwargs)

    def rerun_view(self, request, conversation_id: int):
        """POST from the conversation's page: the same re-run as the list's action, back to the page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not super().has_change_permission(request):
            raise PermissionDenied
        self.rerun_extraction(request, Conversation.objects.filter(pk=conversation_id))
        return redirect("admin:transcripts_conversation_change", conversation_id)

    @admin.display(description=_("extraction stats"))
    def extraction_stats_pretty(self, obj):
        """The counts in words, then the stats as stored (their keys are data: stable, in English)."""
        if not obj.extraction_stats:
            return "-"
        return format_html(
            "<p>{}</p><pre>{}</pre>",
            stats_text(obj.extraction_stats),
            json.dumps(obj.extraction_stats, indent=2, sort_keys=True),
        )

    @admin.action(description=_("Re-run extraction of the selected conversations"), permissions=["change"])
    def rerun_extraction(self, request, queryset):
        """Reset and queue the extraction of the selected conversations (``conversations_extract_rerun``)."""
        result = conversations_extract_rerun(conversation_ids=list(queryset.values_list("pk", flat=True)))
        if result.queued:
            message = ngettext(
                "Queued extraction for %(n)d conversation: %(ids)s. Any retry it had scheduled was replaced.",
                "Queued extraction for %(n)d conversations: %(ids)s. Any retry they had scheduled was replaced.",
                len(result.queued),
            )
            named = conversation_names(result.queued)
            self.message_user(request, message % {"n": len(result.queued), "ids": named}, messages.SUCCESS)
        by_reason: dict[str, list[int]] = {}
        for pk, reason in sorted(result.refused.items()):
            by_reason.setdefault(reason, []).append(pk)
        for reason, ids in by_reason.items():
            text = gettext("Not queued, %(reason)s: %(ids)s.") % {
                "reason": rerun_refusal_words(reason),
                "ids": conversation_names(ids),
            }
            self.message_user(request, text, messages.WARNING)


@admin.register(Sighting)
class SightingAdmin(admin.ModelAdmin):
    list_display = ["seen_at", "person", "room"]
    list_filter = ["room", "person", "seen_at"]
    list_select_related = ["person", "room"]
    date_hierarchy = "seen_at"


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ["occurred_at", "kind", "room", "person"]
    list_filter = ["kind", "room", "occurred_at"]
    list_select_related = ["room", "person"]
    date_hierarchy = "occurred_at"
