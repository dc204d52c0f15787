"""The admin for transcripts: conversations with their turns (read-only), extraction status, re-running extraction."""

import json

from django.contrib import admin, messages
from django.db.models import Count
from django.utils.html import format_html

from transcripts.models import Conversation, Event, Sighting, Turn
from transcripts.selectors import extraction_hint
from transcripts.services.rerun import conversations_extract_rerun


def stats_text(stats: dict) -> str:
    """The numeric extraction stats as 'name n, ...' (the stats hold counts, never memory text)."""
    return ", ".join(
        f"{name} {value}"
        for name, value in sorted((stats or {}).items())
        if isinstance(value, int | float) and not isinstance(value, bool)
    )


class TurnInline(admin.TabularInline):
    model = Turn
    extra = 0
    can_delete = False
    fields = ["created_at", "role", "speaker", "text"]
    readonly_fields = fields

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("speaker")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class EndedFilter(admin.SimpleListFilter):
    title = "ended"
    parameter_name = "ended"

    def lookups(self, request, model_admin):
        return [("yes", "ended"), ("no", "still open")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(ended_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(ended_at__isnull=True)
        return queryset


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    """Conversations are records of what was said: read-only, except for re-running their extraction."""

    list_display = [
        "id",
        "started_at",
        "room",
        "speaker_or_unknown",
        "language",
        "model_location",
        "turn_count",
        "ended_at",
        "ended_by",
        "extraction_status",
        "extraction_stats_text",
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
    fieldsets = [
        (None, {"fields": ["room", "speaker", "language", "model_location", "started_at", "ended_at", "ended_by"]}),
        (
            "Extraction",
            {
                "fields": [
                    "extraction_status",
                    "extraction_stats_pretty",
                    "extraction_attempts",
                    "extraction_error",
                    "extraction_hint_text",
                    "extracted_at",
                    "extraction_blocked",
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

    @admin.display(description="speaker", ordering="speaker__name")
    def speaker_or_unknown(self, obj):
        return obj.speaker or "unknown"

    @admin.display(description="turns", ordering="turn_count")
    def turn_count(self, obj):
        return obj.turn_count

    @admin.display(description="extraction stats")
    def extraction_stats_text(self, obj):
        return stats_text(obj.extraction_stats)

    @admin.display(description="what to do")
    def extraction_hint_text(self, obj):
        return extraction_hint(conversation=obj) or "-"

    @admin.display(description="extraction stats")
    def extraction_stats_pretty(self, obj):
        if not obj.extraction_stats:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(obj.extraction_stats, indent=2, sort_keys=True))

    @admin.action(description="Re-run extraction of the selected conversations", permissions=["change"])
    def rerun_extraction(self, request, queryset):
        """Reset and queue the extraction of the selected conversations (``conversations_extract_rerun``)."""
        result = conversations_extract_rerun(conversation_ids=list(queryset.values_list("pk", flat=True)))
        if result.queued:
            self.message_user(
                request,
                f"Queued extraction for {len(result.queued)} conversation(s): "
                f"{', '.join(f'#{pk}' for pk in result.queued)}.",
                messages.SUCCESS,
            )
        by_reason: dict[str, list[int]] = {}
        for pk, reason in sorted(result.refused.items()):
            by_reason.setdefault(reason, []).append(pk)
        for reason, ids in by_reason.items():
            self.message_user(request, f"Not queued, {reason}: {', '.join(f'#{pk}' for pk in ids)}.", messages.WARNING)


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
