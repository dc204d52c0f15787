"""People and rooms over /internal/v1/, what is stored about a person, their export and erasure, procedures."""

import pytest

from memories.models import Kind, Memory, Scope, Status, Tombstone
from memories.tests.factories import MemoryFactory
from people.models import Person, Room
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db
V1 = "/internal/v1"
LOCAL = {"model_location": "local"}  # where the model that reads listed memory text runs (the cloud rule)


def test_a_newcomer_creates_a_room_and_a_person_and_uses_their_ids(api):
    room = api.post(f"{V1}/rooms", {"name": "Küche"})
    person = api.post(f"{V1}/people", {"name": "Anna", "aliases": ["Anni"], "preferred_language": "de"})
    assert room.status_code == 201 and person.status_code == 201, (room.content, person.content)
    room_id, person_id = room.json()["id"], person.json()["id"]
    assert person.json()["aliases"] == ["Anni"] and person.json()["preferred_language"] == "de"
    remembered = api.post(
        f"{V1}/memories/remember",
        {"content": "Der Ersatzschlüssel liegt in der blauen Dose.", "room_id": room_id, "speaker_id": person_id},
    )
    assert remembered.status_code == 201
    assert [p["id"] for p in api.get(f"{V1}/people").json()] == [person_id]
    assert [r["name"] for r in api.get(f"{V1}/rooms").json()] == ["Küche"]
    assert api.get(f"{V1}/people/{person_id}").json()["name"] == "Anna"
    assert api.get(f"{V1}/rooms/{room_id}").json()["name"] == "Küche"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "Anna", "aliases": "Anni"}, "aliases"),
        ({"name": "Anna", "aliases": [""]}, "aliases[0]"),
        ({"name": "Anna", "preferred_language": "Deutsch"}, "preferred_language"),
        ({"name": "Anna\x00"}, "name"),
    ],
)
def test_bad_people_are_refused_naming_the_field(api, body, field):
    response = api.post(f"{V1}/people", body)
    assert response.status_code == 400 and response.json()["field"] == field, response.content
    assert not Person.objects.exists()


def test_patch_changes_only_the_given_fields_and_names_are_unique(api):
    anna, ben = PersonFactory(name="Anna", preferred_language="de"), PersonFactory(name="Ben")
    response = api.patch(f"{V1}/people/{anna.pk}", {"aliases": ["Mama"]})
    assert response.status_code == 200 and response.json()["aliases"] == ["Mama"]
    assert response.json()["preferred_language"] == "de" and response.json()["name"] == "Anna"
    taken = api.patch(f"{V1}/people/{anna.pk}", {"name": "BEN"})
    assert taken.status_code == 409 and taken.json()["field"] == "name"
    kitchen = RoomFactory(name="Kitchen")
    assert api.patch(f"{V1}/rooms/{kitchen.pk}", {"name": "Küche"}).json()["name"] == "Küche"
    assert api.post(f"{V1}/rooms", {"name": "KÜCHE"}).status_code == 409
    assert ben.name == "Ben"


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("get", "/people/999999", "person_id"),
        ("patch", "/people/999999", "person_id"),
        ("get", "/people/999999/memories", "person_id"),
        ("get", "/people/999999/export", "person_id"),
        ("post", "/people/999999/deletion", "person_id"),
        ("post", "/people/999999/forget_everything", "person_id"),
        ("get", "/rooms/999999", "room_id"),
        ("patch", "/rooms/999999", "room_id"),
        ("delete", "/rooms/999999", "room_id"),
    ],
)
def test_unknown_ids_are_404_naming_the_field(api, method, path, field):
    body = {"name": "X"} if method == "patch" else None
    response = getattr(api, method)(f"{V1}{path}", body) if body or method != "get" else api.get(f"{V1}{path}")
    assert response.status_code == 404 and response.json()["field"] == field, response.content


def test_deleting_a_person_needs_the_confirmation_token_and_answers_what_it_removed(api):
    anna, kitchen = PersonFactory(name="Anna"), RoomFactory()
    MemoryFactory(scope=Scope.PRIVATE, owner=anna)
    conversation = ConversationFactory(room=kitchen, speaker=anna)

    for body in (None, {}, {"token": "forged", "confirm": True}):
        refused = api.delete(f"{V1}/people/{anna.pk}", body)
        assert refused.status_code == 400 and refused.json()["field"] in ("body", "token"), refused.content
    request = api.post(f"{V1}/people/{anna.pk}/deletion").json()
    assert request["would_remove"] == {
        "private_memories": 1,
        "forget_blocks": 0,
        "sightings": 0,
        "conversations_to_block": 1,
    }
    unconfirmed = api.delete(f"{V1}/people/{anna.pk}", {"token": request["token"]})
    assert unconfirmed.status_code == 400 and unconfirmed.json()["field"] == "confirm"
    assert Person.objects.filter(pk=anna.pk).exists() and Memory.objects.exists()

    deleted = api.delete(f"{V1}/people/{anna.pk}", {"token": request["token"], "confirm": True})

    assert deleted.status_code == 200, deleted.content
    assert deleted.json() == {
        "person_id": anna.pk,
        "private_memories_deleted": 1,
        "forget_blocks_deleted": 0,
        "sightings_deleted": 0,
        "conversations_blocked": 1,
    }
    assert not Person.objects.exists() and not Memory.objects.exists()
    assert Conversation.objects.get(pk=conversation.pk).extraction_blocked


def test_a_room_in_use_is_kept(api):
    kitchen, empty = RoomFactory(), RoomFactory()
    MemoryFactory(scope=Scope.ROOM, room=kitchen)
    in_use = api.delete(f"{V1}/rooms/{kitchen.pk}")
    assert in_use.status_code == 409 and in_use.json()["field"] == "room_id" and "1 memories" in in_use.json()["error"]
    assert api.delete(f"{V1}/rooms/{empty.pk}").json() == {"room_id": empty.pk}
    assert list(Room.objects.all()) == [kitchen]


def test_what_do_you_know_about_me_lists_only_what_they_may_see(api):
    anna, ben = PersonFactory(name="Anna"), PersonFactory(name="Ben")
    own = MemoryFactory(content="Meine PIN ist 2468.", scope=Scope.PRIVATE, owner=anna)
    about = MemoryFactory(content="Anna hat am 12. Mai Geburtstag.", about=anna, provenance="extracted")
    MemoryFactory(content="Überraschungsparty für Anna.", scope=Scope.PRIVATE, owner=ben, about=anna)
    MemoryFactory(content="Anna wohnte in Graz.", about=anna, status=Status.SUPERSEDED)
    MemoryFactory(content="Der Müll kommt am Dienstag.")

    page = api.get(f"{V1}/people/{anna.pk}/memories", LOCAL).json()

    assert page["count"] == 2
    by_id = {m["id"]: m for m in page["items"]}
    assert set(by_id) == {own.pk, about.pk}
    assert by_id[own.pk]["relation"] == "owner" and by_id[about.pk]["relation"] == "about"
    assert by_id[about.pk]["label"] == "from conversation" and by_id[about.pk]["scope"] == "shared"
    assert by_id[own.pk]["date"]
    assert api.get(f"{V1}/people/{anna.pk}/memories", {"limit": 1, **LOCAL}).json()["count"] == 2
    assert len(api.get(f"{V1}/people/{anna.pk}/memories", {"limit": 1, **LOCAL}).json()["items"]) == 1


def test_export_over_the_api(api):
    anna = PersonFactory(name="Anna")
    MemoryFactory(content="Anna trinkt Tee.", scope=Scope.PRIVATE, owner=anna)
    document = api.get(f"{V1}/people/{anna.pk}/export").json()
    assert document["format"] == "justai-memory/person-export/1"
    assert [m["content"] for m in document["memories"]] == ["Anna trinkt Tee."]


def test_forget_everything_about_me_through_the_forget_confirmation(api):
    anna, ben, kitchen = PersonFactory(name="Anna"), PersonFactory(name="Ben"), RoomFactory()
    theirs = [
        MemoryFactory(content="Meine PIN ist 2468.", scope=Scope.PRIVATE, owner=anna),
        MemoryFactory(content="Anna sitzt am Fenster.", scope=Scope.ROOM, room=kitchen, about=anna),
    ]
    bens = MemoryFactory(content="Überraschungsparty für Anna.", scope=Scope.PRIVATE, owner=ben, about=anna)
    request = api.post(f"{V1}/people/{anna.pk}/forget_everything").json()
    assert sorted(request["memory_ids"]) == sorted(m.pk for m in theirs) and request["token"]
    # Nothing goes without the confirmation, or for another speaker.
    assert api.post(f"{V1}/memories/forget", {"token": request["token"], "speaker_id": anna.pk}).status_code == 400
    foreign = api.post(f"{V1}/memories/forget", {"token": request["token"], "speaker_id": ben.pk, "confirm": True})
    assert foreign.status_code == 403
    assert Memory.objects.count() == 3

    done = api.post(f"{V1}/memories/forget", {"token": request["token"], "speaker_id": anna.pk, "confirm": True})

    assert done.status_code == 200 and done.json()["forgotten"] == 2
    assert list(Memory.objects.all()) == [bens]
    assert Tombstone.objects.count() == 2
    empty = api.post(f"{V1}/people/{anna.pk}/forget_everything").json()
    assert empty == {"token": None, "expires_at": None, "memory_ids": []}


def test_procedures_for_automations_are_visible_as_for_recall_and_paginated(api):
    anna, kitchen, bath = PersonFactory(), RoomFactory(), RoomFactory()
    shared = MemoryFactory(kind=Kind.PROCEDURE, content="Bei Regen die Markise einfahren.")
    here = MemoryFactory(kind=Kind.PROCEDURE, scope=Scope.ROOM, room=kitchen, content="Licht um 7 an.")
    MemoryFactory(kind=Kind.PROCEDURE, scope=Scope.ROOM, room=bath, content="Lüfter nach dem Duschen.")
    annas = MemoryFactory(kind=Kind.PROCEDURE, scope=Scope.PRIVATE, owner=anna, content="Kaffee um 6.")
    MemoryFactory(kind=Kind.FACT, content="Der Müll kommt am Dienstag.")

    unknown = api.get(f"{V1}/memories", {"kind": "procedure", "room_id": kitchen.pk, **LOCAL}).json()
    assert [m["id"] for m in unknown["items"]] == [shared.pk, here.pk] and unknown["count"] == 2
    assert unknown["items"][0]["label"] == "confirmed"
    known = api.get(
        f"{V1}/memories", {"kind": "procedure", "room_id": kitchen.pk, "speaker_id": anna.pk, **LOCAL}
    ).json()
    assert [m["id"] for m in known["items"]] == [shared.pk, here.pk, annas.pk]
    page = api.get(
        f"{V1}/memories", {"kind": "procedure", "room_id": kitchen.pk, "limit": 1, "offset": 1, **LOCAL}
    ).json()
    assert [m["id"] for m in page["items"]] == [here.pk]

    for params, field in [
        ({"room_id": kitchen.pk}, "kind"),
        ({"kind": "fact", "room_id": kitchen.pk}, "kind"),
        ({"kind": "procedure"}, "room_id"),
    ]:
        response = api.get(f"{V1}/memories", params)
        assert response.status_code == 400 and response.json()["field"] == field, response.content
    unknown_room = api.get(f"{V1}/memories", {"kind": "procedure", "room_id": 999999, **LOCAL})
    assert unknown_room.status_code == 404 and unknown_room.json()["field"] == "room_id"
