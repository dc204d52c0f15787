"""People and rooms: create and update with validation that names the field; rooms that are referenced stay."""

import pytest

from justai_core.errors import ApplicationError
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.models import Person, Room
from people.services import person_create, person_update, room_create, room_delete, room_update
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Sighting
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db


def test_person_create_cleans_name_aliases_and_language():
    person = person_create(name="  Anna ", aliases=["Anni", " anni ", "Mama"], preferred_language="DE")
    assert (person.name, person.aliases, person.preferred_language) == ("Anna", ["Anni", "Mama"], "de")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": 7}, "name"),
        ({"name": "Anna", "aliases": "Anni"}, "aliases"),
        ({"name": "Anna", "aliases": ["Anni", ""]}, "aliases[1]"),
        ({"name": "Anna", "aliases": ["a"] * 21}, "aliases"),
        ({"name": "Anna", "preferred_language": "Deutsch"}, "preferred_language"),
    ],
)
def test_person_create_rejects_bad_values_naming_the_field(fields, field):
    with pytest.raises(ApplicationError) as exc:
        person_create(**fields)
    assert exc.value.field == field and exc.value.status == 400
    assert not Person.objects.exists()


def test_names_are_unique_regardless_of_case_with_a_409():
    person_create(name="Anna")
    with pytest.raises(ApplicationError) as exc:
        person_create(name="ANNA")
    assert (exc.value.field, exc.value.status) == ("name", 409)
    room_create(name="Küche")
    with pytest.raises(ApplicationError) as exc:
        room_create(name="küche")
    assert (exc.value.field, exc.value.status) == ("name", 409)


def test_person_update_changes_only_the_given_fields():
    anna, ben = PersonFactory(name="Anna", preferred_language="de"), PersonFactory(name="Ben")
    person_update(person=anna, changes={"aliases": ["Anni"]})
    anna.refresh_from_db()
    assert (anna.name, anna.aliases, anna.preferred_language) == ("Anna", ["Anni"], "de")
    with pytest.raises(ApplicationError) as exc:
        person_update(person=anna, changes={"name": "ben"})
    assert exc.value.status == 409
    with pytest.raises(ApplicationError) as exc:
        person_update(person=anna, changes={"nickname": "A"})
    assert exc.value.field == "nickname"
    person_update(person=anna, changes={"name": "anna"})  # her own name in another case is no conflict
    anna.refresh_from_db()
    assert anna.name == "anna" and ben.name == "Ben"


def test_room_update_renames():
    room = RoomFactory(name="Kitchen")
    room_update(room=room, name="Küche")
    room.refresh_from_db()
    assert room.name == "Küche"


def test_a_room_without_memories_conversations_or_blocks_is_deleted_with_its_sightings():
    room, anna = RoomFactory(), PersonFactory()
    Sighting.objects.create(person=anna, room=room)
    assert room_delete(room=room) == room.pk
    assert not Room.objects.exists() and not Sighting.objects.exists()


def test_a_room_that_holds_memories_conversations_or_forget_blocks_is_kept():
    for make in (
        lambda room: MemoryFactory(scope="room", room=room),
        lambda room: ConversationFactory(room=room),
        # A block deleted with its room could let the forgotten content come back.
        lambda room: memories_forget(memory_ids=[MemoryFactory(scope="room", room=room).pk], actor="test"),
    ):
        room = RoomFactory()
        make(room)
        with pytest.raises(ApplicationError) as exc:
            room_delete(room=room)
        assert (exc.value.field, exc.value.status) == ("room_id", 409)
        assert Room.objects.filter(pk=room.pk).exists()
