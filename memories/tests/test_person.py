"""What the memory holds about one person, "forget everything about me", procedures for automations."""

import pytest

from justai_core.errors import ApplicationError
from justai_core.locations import LOCAL
from memories.caller import Caller
from memories.models import AuditEvent, Kind, Memory, Scope, Status, Tombstone
from memories.selectors.person import person_forget_block_counts, person_memories, procedures_for
from memories.services.forget import forget_everything_request_create, forget_request_confirm, memories_forget
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def household():
    anna, ben = PersonFactory(name="Anna"), PersonFactory(name="Ben")
    kitchen, bath = RoomFactory(name="Küche"), RoomFactory(name="Bad")
    m = {
        "own_private": MemoryFactory(content="Meine PIN ist 2468.", scope=Scope.PRIVATE, owner=anna),
        "shared_about": MemoryFactory(content="Anna hat am 12. Mai Geburtstag.", about=anna),
        "room_about": MemoryFactory(content="Anna sitzt am Fenster.", scope=Scope.ROOM, room=kitchen, about=anna),
        "superseded_about": MemoryFactory(content="Anna wohnt in Graz.", about=anna, status=Status.SUPERSEDED),
        # Ben's private note about Anna: hers to never see.
        "bens_private_about": MemoryFactory(
            content="Überraschungsparty für Anna am Samstag.", scope=Scope.PRIVATE, owner=ben, about=anna
        ),
        "bens_private": MemoryFactory(content="Ben mag Schach.", scope=Scope.PRIVATE, owner=ben),
        "shared_other": MemoryFactory(content="Der Müll kommt am Dienstag."),
        "other_room": MemoryFactory(content="Das Bad hat einen Boiler.", scope=Scope.ROOM, room=bath),
    }
    return anna, ben, kitchen, m


def test_person_memories_are_theirs_and_about_them_and_never_someone_elses_private(household):
    anna, ben, _, m = household
    ids = set(person_memories(person=anna).values_list("pk", flat=True))
    assert ids == {m[k].pk for k in ("own_private", "shared_about", "room_about", "superseded_about")}
    active = set(person_memories(person=anna).active().values_list("pk", flat=True))
    assert m["superseded_about"].pk not in active
    assert set(person_memories(person=ben).values_list("pk", flat=True)) == {
        m["bens_private_about"].pk,
        m["bens_private"].pk,
    }


def test_forget_everything_about_me_is_one_token_for_the_whole_set_and_leaves_tombstones(household):
    anna, ben, _, m = household
    token, expires_at, ids = forget_everything_request_create(person=anna)
    assert token and expires_at and set(ids) == set(person_memories(person=anna).values_list("pk", flat=True))
    assert m["bens_private_about"].pk not in ids
    # Not confirmed, or by someone else: nothing is removed and the token stays usable.
    with pytest.raises(ApplicationError):
        forget_request_confirm(token=token, speaker=anna, confirm=False)
    with pytest.raises(ApplicationError) as exc:
        forget_request_confirm(token=token, speaker=ben, confirm=True)
    assert exc.value.status == 403
    assert Memory.objects.filter(pk__in=ids).count() == len(ids)

    tombstones = forget_request_confirm(token=token, speaker=anna, confirm=True)

    assert {t.memory_id for t in tombstones} == set(ids)  # the room memory about her too
    assert not Memory.objects.filter(pk__in=ids).exists()
    assert Memory.objects.filter(pk=m["bens_private_about"].pk).exists()
    assert Tombstone.objects.filter(memory_id__in=ids).count() == len(ids)
    assert AuditEvent.objects.filter(action="forgotten", memory_id__in=ids).count() == len(ids)
    with pytest.raises(ApplicationError) as exc:
        forget_request_confirm(token=token, speaker=anna, confirm=True)
    assert exc.value.status == 409


def test_forget_everything_with_nothing_stored_issues_no_token():
    assert forget_everything_request_create(person=PersonFactory()) == (None, None, [])


def test_forget_block_counts(household):
    anna, _, _, m = household
    memories_forget(memory_ids=[m["own_private"].pk], actor="test", by_person=anna)
    memories_forget(memory_ids=[m["shared_other"].pk], actor="test", by_person=anna)
    assert person_forget_block_counts(person=anna) == {"private": 1, "forgotten_by_them": 2}


def test_procedures_are_visible_as_for_recall(household):
    anna, ben, kitchen, _ = household
    shared = MemoryFactory(kind=Kind.PROCEDURE, content="Wenn es regnet, Markise einfahren.")
    in_kitchen = MemoryFactory(kind=Kind.PROCEDURE, scope=Scope.ROOM, room=kitchen, content="Licht um 7 an.")
    annas = MemoryFactory(kind=Kind.PROCEDURE, scope=Scope.PRIVATE, owner=anna, content="Anna: Kaffee um 6.")
    MemoryFactory(kind=Kind.PROCEDURE, content="Alt.", status=Status.SUPERSEDED)
    assert list(procedures_for(caller=Caller(room=kitchen, speaker=None, model_location=LOCAL))) == [shared, in_kitchen]
    assert list(procedures_for(caller=Caller(room=kitchen, speaker=anna, model_location=LOCAL))) == [
        shared,
        in_kitchen,
        annas,
    ]
    assert list(procedures_for(caller=Caller(room=RoomFactory(), speaker=ben, model_location=LOCAL))) == [shared]
