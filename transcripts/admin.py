from django.contrib import admin

from transcripts.models import Conversation, Event, Sighting, Turn


class TurnInline(admin.TabularInline):
    model = Turn
    extra = 0


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "room",
        "speaker",
        "language",
        "model_location",
        "started_at",
        "ended_at",
        "extraction_status",
    ]
    list_filter = ["extraction_status", "model_location"]
    inlines = [TurnInline]


admin.site.register(Sighting)
admin.site.register(Event)
