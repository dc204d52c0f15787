"""Who was seen where, and the household's events: plain lists."""

from django.contrib import admin

from transcripts.models import Event, Sighting


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
