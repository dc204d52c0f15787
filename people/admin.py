from django.contrib import admin

from people.models import Person, Room
from people.services import person_delete


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ["name", "preferred_language", "created_at"]
    search_fields = ["name"]

    # The stock confirmation page already lists the private memories that go with the person
    # (they cascade); the template adds that their conversations will never be extracted.
    def delete_model(self, request, obj):
        person_delete(person=obj, actor=f"admin:{request.user.pk}")

    def delete_queryset(self, request, queryset):
        for person in queryset:
            person_delete(person=person, actor=f"admin:{request.user.pk}")


@admin.register(Room)
class RoomAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
