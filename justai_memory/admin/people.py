"""Admin for the household (people and rooms): in the wiring layer, since deleting and exporting a person span the apps."""

import json
import re
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import capfirst
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from justai_memory.admin.trail import learned_from
from justai_memory.household import may_export, person_delete, person_delete_preview, person_export
from memories.actors import Actor
from memories.admin.base import language_words, memory_title
from memories.admin.filters import label_name
from memories.models import Memory, MemoryAccess
from memories.selectors.person import person_memories
from people.models import Person, Room
from transcripts.selectors import conversations_spoken_in


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


def export_refusal() -> str:
    return gettext(
        "Exporting needs the permission to view people, memories and conversations: "
        "the export holds their memories' text and what they said."
    )


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "alias_list", "language", "overview", "created_at"]
    list_display_links = ["name"]
    search_fields = ["name", "aliases"]
    actions = ["export_json"]

    @admin.display(description=_("aliases"))
    def alias_list(self, obj):
        return ", ".join(obj.aliases)

    @admin.display(description=_("preferred language"), ordering="preferred_language")
    def language(self, obj):
        return language_words(obj.preferred_language)

    @admin.display(description=_("what is known"))
    def overview(self, obj):
        url = reverse("admin:people_person_overview", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, gettext("What the assistant knows"))

    @admin.action(permissions=["export"], description=_("Export everything stored about them (JSON)"))
    def export_json(self, request, queryset):
        return export_response(people=list(queryset.order_by("pk")))

    def has_export_permission(self, request):
        """The action is offered (and run) only to who may read everything the export holds."""
        return may_export(request.user)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("<int:person_id>/overview/", view(self.overview_view), name="people_person_overview"),
            path("<int:person_id>/export/", view(self.export_view), name="people_person_export"),
            *super().get_urls(),
        ]

    def overview_view(self, request, person_id: int):
        """What the assistant knows about this person: the memories it would show them, inline, each with a
        forget button, and the conversations they spoke in (any turn). Forgotten ones left no text."""
        person = get_object_or_404(Person, pk=person_id)
        if not self.has_view_permission(request, person):
            raise PermissionDenied
        counts = person_delete_preview(person=person)
        # Memory text and conversations only for who may view them in their own lists.
        may_view_memories = request.user.has_perm("memories.view_memory")
        may_view_conversations = request.user.has_perm("transcripts.view_conversation")
        # What the assistant would tell them (person_memories, the visibility rule, as in their export):
        # someone else's private memory about them is not on their page (docs/admin.md says why).
        memories = (
            person_memories(person=person)
            .defer("embedding", "search_vector")
            .select_related("room", "owner")
            .order_by("-created_at", "-pk")
        )
        memory_opts = Memory._meta
        may_forget = request.user.has_perm(f"memories.{get_permission_codename('delete', memory_opts)}")
        here = reverse("admin:people_person_overview", args=[person.pk])
        rows = [
            {
                "memory": m,
                "label": label_name(m.provenance),
                "whose": gettext("theirs") if m.relation == "owner" else gettext("about them"),
                "trail": learned_from(m, said=False),
                "forget_url": f"{reverse('admin:memories_memory_delete', args=[m.pk])}?{urlencode({'next': here})}",
            }
            for m in (memories if may_view_memories else [])
        ]

        def changelist(model: str, **query) -> str:
            return f"{reverse(f'admin:{model}_changelist')}?{urlencode(query)}"

        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": person,
            "title": gettext("What the assistant knows about %(name)s") % {"name": person.name},
            "preferred_language": language_words(person.preferred_language),
            "rows": rows,
            "may_forget": may_forget,
            "may_view_memories": may_view_memories,
            "may_view_conversations": may_view_conversations,
            "conversations": conversations_spoken_in(person=person).select_related("room", "speaker")[:100]
            if may_view_conversations
            else [],
            "links": [
                (
                    gettext("Their private memories, in the memory list"),
                    changelist("memories_memory", owner=person.pk),
                    counts["private_memories"],
                ),
                (
                    gettext("Memories about them, in the memory list"),
                    changelist("memories_memory", about=person.pk),
                    None,
                ),
                (
                    gettext("Sightings"),
                    changelist("transcripts_sighting", person=person.pk),
                    counts["sightings"],
                ),
                (gettext("Events"), changelist("transcripts_event", person=person.pk), None),
                (
                    gettext("Forget blocks of their private memories (no text)"),
                    changelist("memories_tombstone", owner=person.pk),
                    counts["forget_blocks"],
                ),
            ],
            "export_url": reverse("admin:people_person_export", args=[person.pk]) if may_export(request.user) else None,
        }
        return TemplateResponse(request, "admin/people/person/overview.html", context)

    def export_view(self, request, person_id: int):
        person = get_object_or_404(Person, pk=person_id)
        if not (self.has_view_permission(request, person) and may_export(request.user)):
            raise PermissionDenied(export_refusal())
        return export_response(people=[person])

    # The stock confirmation page lists what cascades; the template says what happens to the memories
    # learned from them and to their conversations.
    def get_deleted_objects(self, objs, request):
        """The stock list, with the private memories by their first words and without their access
        counters (rows that only count a memory's recalls)."""
        to_delete, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Their private memories: they cascade with their owner.
        titles = dict(Memory.objects.filter(owner__in=list(objs)).values_list("pk", "content"))
        access = str(capfirst(MemoryAccess._meta.verbose_name))
        memory_link = re.compile(re.escape(reverse("admin:memories_memory_changelist")) + r"(\d+)/change/")
        label = gettext("Private memory, deleted with them")

        def named(items):
            kept = []
            for item in items:
                if isinstance(item, list):
                    kept.append(named(item))
                    continue
                text = str(item)
                if text.startswith(f"{access}:"):
                    continue
                match = memory_link.search(text)
                if match and int(match.group(1)) in titles:
                    memory = Memory(pk=int(match.group(1)), content=titles[int(match.group(1))])
                    item = format_html('{}: <a href="{}">{}</a>', label, match.group(0), memory_title(memory))
                kept.append(item)
            return [item for item in kept if item != []]

        counts = {name: n for name, n in model_count.items() if name != MemoryAccess._meta.verbose_name_plural}
        return named(to_delete), counts, perms_needed, protected

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
