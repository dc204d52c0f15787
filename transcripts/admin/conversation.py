"""Conversations with their turns: read-only records of what was said, what they taught, and their extraction."""

import json

from django.contrib import admin
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from memories.admin.base import language_words, memory_link, when
from memories.admin.filters import label_name
from memories.models import Memory
from transcripts.admin.extraction import extraction_advice, folded, stats_text
from transcripts.admin.rerun import RerunExtraction
from transcripts.models import FORGOTTEN_MARKER, Conversation, Turn
from transcripts.selectors import conversation_speakers, extraction_retries_scheduled


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
class ConversationAdmin(RerunExtraction, admin.ModelAdmin):
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
