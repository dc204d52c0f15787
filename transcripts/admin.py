"""The admin for transcripts: conversations with their turns (read-only), extraction status, re-running extraction."""

import functools
import json

from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count
from django.utils.html import format_html
from django_q.tasks import async_task

from transcripts.models import Conversation, Event, Sighting, Turn

# The job's dotted path is stable (schedules and queued tasks store it); it takes a conversation id.
EXTRACT_JOB = "transcripts.jobs.conversation_extract_job"


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
        "extraction_blocked",
        "started_at",
    ]
    list_select_related = ["room", "speaker"]
    date_hierarchy = "started_at"
    inlines = [TurnInline]
    actions = ["rerun_extraction"]
    fieldsets = [
        (None, {"fields": ["room", "speaker", "language", "model_location", "started_at", "ended_at"]}),
        (
            "Extraction",
            {
                "fields": [
                    "extraction_status",
                    "extraction_stats_pretty",
                    "extraction_attempts",
                    "extraction_error",
                    "extracted_at",
                    "extraction_blocked",
                ]
            },
        ),
    ]
    readonly_fields = [
        "room",
        "speaker",
        "language",
        "model_location",
        "started_at",
        "ended_at",
        "extraction_status",
        "extraction_stats_pretty",
        "extraction_attempts",
        "extraction_error",
        "extracted_at",
        "extraction_blocked",
    ]

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

    @admin.display(description="extraction stats")
    def extraction_stats_pretty(self, obj):
        if not obj.extraction_stats:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(obj.extraction_stats, indent=2, sort_keys=True))

    @admin.action(description="Re-run extraction of the selected conversations", permissions=["change"])
    def rerun_extraction(self, request, queryset):
        """Queue the extraction job (by id) for each ended conversation whose speaker was not deleted."""
        selected = list(queryset.values_list("pk", "ended_at", "extraction_blocked"))
        queued = [pk for pk, ended_at, blocked in selected if ended_at and not blocked]
        for pk in queued:
            transaction.on_commit(
                functools.partial(async_task, EXTRACT_JOB, pk, task_name=f"extract-conversation-{pk}")
            )
        if queued:
            self.message_user(
                request,
                f"Queued extraction for {len(queued)} conversation(s): {', '.join(f'#{pk}' for pk in queued)}.",
                messages.SUCCESS,
            )
        open_ids = [pk for pk, ended_at, _ in selected if not ended_at]
        blocked_ids = [pk for pk, ended_at, blocked in selected if ended_at and blocked]
        if open_ids:
            self.message_user(
                request,
                f"Not queued, still open: {', '.join(f'#{pk}' for pk in open_ids)}. Extraction runs after the end.",
                messages.WARNING,
            )
        if blocked_ids:
            self.message_user(
                request,
                f"Not queued, speaker deleted (never extracted): {', '.join(f'#{pk}' for pk in blocked_ids)}.",
                messages.WARNING,
            )


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
