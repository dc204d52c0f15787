from django.contrib import admin

from people.models import Person, Room


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ["name", "preferred_language", "created_at"]
    search_fields = ["name"]


@admin.register(Room)
class RoomAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
