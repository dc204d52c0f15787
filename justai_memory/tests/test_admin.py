"""The household admin: ids and aliases in the lists, a page per person, the export action."""

import json

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME

from memories.models import Scope
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.models import Room
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Sighting
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db
PEOPLE = "/admin/people/person/"
ROOMS = "/admin/people/room/"


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
