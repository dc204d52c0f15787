"""Admin for the household (people and rooms): in the wiring layer, since deleting and exporting a person span the apps."""

import json

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from justai_memory import admin_recall_preview  # noqa: F401  (registers the memory admin with the recall preview)
from justai_memory.household import person_delete, person_delete_preview, person_export
from memories.actors import Actor
from people.models import Person, Room


def export_response(*, people) -> HttpResponse:
    """A JSON download: one person's export document, or a list of them."""
    documents = [person_export(person=p) for p in people]
    body = documents[0] if len(documents) == 1 else {"people": documents}
    name = f"person-{documents[0]['person']['id']}" if len(documents) == 1 else "people"
    response = HttpResponse(
        json.dumps(body, ensure_ascii=False, indent=2), content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}-export.json"'
    return response


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "alias_list", "preferred_language", "overview", "created_at"]
    list_display_links = ["name"]
    search_fields = ["name", "aliases"]
    actions = ["export_json"]

    @admin.display(description="aliases")
    def alias_list(self, obj):
        return ", ".join(obj.aliases)

    @admin.display(description="what is stored")
    def overview(self, obj):
        return format_html('<a href="{}">overview</a>', reverse("admin:people_person_overview", args=[obj.pk]))

    @admin.action(description="Export everything stored about them (JSON)")
    def export_json(self, request, queryset):
        return export_response(people=list(queryset.order_by("pk")))

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:person_id>/overview/", view(self.overview_view), name="people_person_overview"),
            path("<int:person_id>/export/", view(self.export_view), name="people_person_export"),
            *super().get_urls(),
        ]

    def overview_view(self, request, person_id: int):
        """Links to everything stored about this person, with counts."""
        person = get_object_or_404(Person, pk=person_id)
        if not self.has_view_permission(request, person):
            raise PermissionDenied
        counts = person_delete_preview(person=person)

        def changelist(model: str, **query) -> str:
            params = "&".join(f"{k}={v}" for k, v in query.items())
            return f"{reverse(f'admin:{model}_changelist')}?{params}"

        links = [
            ("Their private memories", changelist("memories_memory", owner=person.pk), counts["private_memories"]),
            ("Memories about them", changelist("memories_memory", about=person.pk), None),
            ("Conversations they spoke in", changelist("transcripts_conversation", speaker=person.pk), None),
            ("Sightings", changelist("transcripts_sighting", person=person.pk), counts["sightings"]),
            ("Events", changelist("transcripts_event", person=person.pk), None),
            (
                "Forget blocks of their private memories",
                changelist("memories_tombstone", owner=person.pk),
                counts["forget_blocks"],
            ),
            ("Export everything (JSON)", reverse("admin:people_person_export", args=[person.pk]), None),
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": person,
            "title": f"What is stored about {person.name}",
            "links": links,
        }
        return TemplateResponse(request, "admin/people/person/overview.html", context)

    def export_view(self, request, person_id: int):
        person = get_object_or_404(Person, pk=person_id)
        if not self.has_view_permission(request, person):
            raise PermissionDenied
        return export_response(people=[person])

    # The stock confirmation page already lists the private memories that go with the person
    # (they cascade); the template adds that their conversations will never be extracted.
    def delete_model(self, request, obj):
        person_delete(person=obj, actor=Actor.admin(request.user))

    def delete_queryset(self, request, queryset):
        for person in queryset:
            person_delete(person=person, actor=Actor.admin(request.user))


@admin.register(Room)
class RoomAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "created_at"]
    list_display_links = ["name"]
    search_fields = ["name"]
