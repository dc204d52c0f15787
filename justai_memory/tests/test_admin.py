"""The household admin: ids and aliases in the lists, a page per person, the export action."""

import json

import pytest
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django_q.models import Schedule

from justai_memory.admin.jobs import ScheduleAdmin
from justai_memory.admin.people import PersonAdmin, RoomAdmin
from justai_memory.admin.recall_preview import MemoryWithPreviewAdmin
from justai_memory.admin.site import HouseholdAdminSite
from memories.models import Memory, Scope
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.models import Person, Room
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Sighting
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db
PEOPLE = "/admin/people/person/"
ROOMS = "/admin/people/room/"


def test_the_household_admin_config_installs_its_site_and_registers_the_packages_admins():
    """``justai_memory.admin`` registers nothing on import (INSTALLED_APPS imports it before the models);
    ``HouseholdAdminConfig.ready`` does, after every app's own admin module."""
    assert isinstance(admin.site._wrapped, HouseholdAdminSite)
    registered = {model: type(model_admin) for model, model_admin in admin.site._registry.items()}
    assert registered[Person] is PersonAdmin and registered[Room] is RoomAdmin
    assert registered[Memory] is MemoryWithPreviewAdmin and registered[Schedule] is ScheduleAdmin


def test_the_lists_show_ids_and_aliases(admin_client):
    anna, kitchen = PersonFactory(name="Anna", aliases=["Anni", "Mama"]), RoomFactory(name="Küche")
    people = admin_client.get(PEOPLE).content.decode()
    assert f'<td class="field-id">{anna.pk}</td>' in people and "Anni, Mama" in people
    assert f'<td class="field-id">{kitchen.pk}</td>' in admin_client.get(ROOMS).content.decode()
    found = admin_client.get(PEOPLE, {"q": "Anni"}).context["cl"].result_list
    assert list(found) == [anna]


def test_the_overview_links_their_memories_sightings_and_blocks(admin_client):
    anna, kitchen = PersonFactory(name="Anna"), RoomFactory()
    MemoryFactory(scope=Scope.PRIVATE, owner=anna)
    forgotten = MemoryFactory(scope=Scope.PRIVATE, owner=anna)
    memories_forget(memory_ids=[forgotten.pk], actor="test")
    Sighting.objects.create(person=anna, room=kitchen)
    ConversationFactory(room=kitchen, speaker=anna)
    page = admin_client.get(f"{PEOPLE}{anna.pk}/overview/")
    assert page.status_code == 200
    html = page.content.decode()
    for link in (
        f"/admin/memories/memory/?owner={anna.pk}",
        f"/admin/memories/memory/?about={anna.pk}",
        f"/admin/transcripts/sighting/?person={anna.pk}",
        f"/admin/memories/tombstone/?owner={anna.pk}",
        f"{PEOPLE}{anna.pk}/export/",
    ):
        assert f'href="{link}"' in html
        assert admin_client.get(link).status_code == 200, link
    assert "Their private memories, in the memory list</a> (1)" in html
    assert "Forget blocks of their private memories (no text)</a> (1)" in html
    assert admin_client.get(f"/admin/memories/memory/?owner={anna.pk}").context["cl"].result_count == 1
    assert f"{PEOPLE}{anna.pk}/overview/" in admin_client.get(f"{PEOPLE}{anna.pk}/change/").content.decode()


def test_the_export_action_downloads_their_documents(admin_client):
    anna, ben = PersonFactory(name="Anna"), PersonFactory(name="Ben")
    MemoryFactory(content="Anna trinkt Tee.", scope=Scope.PRIVATE, owner=anna)
    one = admin_client.post(PEOPLE, {"action": "export_json", ACTION_CHECKBOX_NAME: [anna.pk]})
    assert one["Content-Disposition"] == f'attachment; filename="person-{anna.pk}-export.json"'
    assert [m["content"] for m in json.loads(one.content)["memories"]] == ["Anna trinkt Tee."]
    both = json.loads(
        admin_client.post(PEOPLE, {"action": "export_json", ACTION_CHECKBOX_NAME: [anna.pk, ben.pk]}).content
    )
    assert [d["person"]["name"] for d in both["people"]] == ["Anna", "Ben"]


def test_a_room_with_forget_blocks_cannot_be_deleted_in_the_admin(admin_client):
    room = RoomFactory()
    memories_forget(memory_ids=[MemoryFactory(scope=Scope.ROOM, room=room).pk], actor="test")
    page = admin_client.post(f"{ROOMS}{room.pk}/delete/", {"post": "yes"})
    assert page.status_code == 200 and "Cannot delete" in page.content.decode()
    assert Room.objects.filter(pk=room.pk).exists()


def test_exporting_a_person_needs_the_permission_to_read_their_memories_and_conversations(client, django_user_model):
    from django.contrib.auth.models import Permission

    anna = PersonFactory(name="Anna")
    MemoryFactory(content="Annas PIN ist 4321.", scope=Scope.PRIVATE, owner=anna)
    user = django_user_model.objects.create_user(username="viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_person"))
    client.force_login(user)
    refused = client.get(f"{PEOPLE}{anna.pk}/export/")
    assert refused.status_code == 403 and b"4321" not in refused.content
    action = client.post(PEOPLE, {"action": "export_json", ACTION_CHECKBOX_NAME: [anna.pk]}, follow=True)
    assert action["Content-Type"].startswith("text/html") and b"4321" not in action.content
    assert "export_json" not in client.get(PEOPLE).content.decode()
    overview = client.get(f"{PEOPLE}{anna.pk}/overview/").content.decode()
    assert overview.count("person-export") == 0 and f"{PEOPLE}{anna.pk}/export/" not in overview
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_memory", "view_conversation"]))
    client.force_login(django_user_model.objects.get(pk=user.pk))
    assert b"4321" in client.get(f"{PEOPLE}{anna.pk}/export/").content
    assert b"4321" in client.post(PEOPLE, {"action": "export_json", ACTION_CHECKBOX_NAME: [anna.pk]}).content
    assert f"{PEOPLE}{anna.pk}/export/" in client.get(f"{PEOPLE}{anna.pk}/overview/").content.decode()


def test_a_persons_page_shows_what_the_assistant_would_tell_them_not_anothers_private_note_about_them(admin_client):
    julia, marco, kitchen = PersonFactory(name="Julia"), PersonFactory(name="Marco"), RoomFactory(name="Küche")
    MemoryFactory(content="Überraschungsparty für Marco am Samstag.", scope=Scope.PRIVATE, owner=julia, about=marco)
    MemoryFactory(content="Marco mag Espresso.", scope=Scope.SHARED, about=marco)
    MemoryFactory(content="Marcos Fahrrad steht in der Küche.", scope=Scope.ROOM, room=kitchen, about=marco)
    MemoryFactory(content="Marcos PIN ist 1234.", scope=Scope.PRIVATE, owner=marco)
    page = admin_client.get(f"{PEOPLE}{marco.pk}/overview/").content.decode()
    assert "Überraschungsparty" not in page
    assert all(text in page for text in ("Marco mag Espresso.", "Marcos Fahrrad", "Marcos PIN ist 1234."))
    assert "3 memories: theirs or about them" in page
    assert "Überraschungsparty" in admin_client.get(f"{PEOPLE}{julia.pk}/overview/").content.decode()


def test_deleting_a_person_or_a_conversation_says_what_happens_to_the_memories_learned_from_them(admin_client):
    from django.utils import timezone

    from memories.models import Memory

    julia, kitchen = PersonFactory(name="Julia"), RoomFactory()
    conversation = ConversationFactory(room=kitchen, speaker=julia)
    secret = MemoryFactory(
        content="Julias PIN ist 2468 für die Bank.",
        scope=Scope.PRIVATE,
        owner=julia,
        access_count=2,
        last_accessed_at=timezone.now(),
    )
    MemoryFactory(content="Der Müll wird dienstags abgeholt.", source_ref=f"conversation:{conversation.pk}")
    MemoryFactory(content="Die Heizung ist kaputt.", source_ref=f"conversation:{conversation.pk}")
    Memory.objects.filter(pk=secret.pk).update(source_ref=f"conversation:{conversation.pk}")
    page = admin_client.get(f"{PEOPLE}{julia.pk}/delete/").content.decode()
    assert "Private memory, deleted with them: " in page and "“Julias PIN ist 2468 für die …”" in page
    assert "no forget block stays" in page and "Memories about them" in page
    assert "Memory #" not in page and "Access of memory" not in page and "memory access" not in page.lower()
    deleting = admin_client.get(f"/admin/transcripts/conversation/{conversation.pk}/delete/").content.decode()
    assert "The 3 memories learned from them stay" in deleting and "forget them in the memory list" in deleting
    bulk = admin_client.post(
        "/admin/transcripts/conversation/", {"action": "delete_selected", ACTION_CHECKBOX_NAME: [conversation.pk]}
    ).content.decode()
    assert "The 3 memories learned from them stay" in bulk
