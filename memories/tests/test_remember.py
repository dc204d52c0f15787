"""memory_remember: confirmed, from the tool, scoped by the request, lifting the speaker's own forget blocks."""

import pytest

from justai_core.errors import ApplicationError
from justai_core.locations import CLOUD
from memories.caller import Caller
from memories.models import AuditEvent, Memory, Provenance, Scope, Source, Tombstone
from memories.services.forget import memories_forget
from memories.services.remember import memory_remember
from memories.services.store import MemoryDraft, StoreOutcome, memory_store
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


def remember(content, *, speaker=None, room=None, **kwargs):
    # Remember reads no memory: the caller's model location is cloud, as the API resolves it for remember.
    caller = Caller(room=room or RoomFactory(), speaker=speaker, model_location=CLOUD)
    return memory_remember(content=content, caller=caller, **kwargs)


def test_remember_stores_a_confirmed_shared_fact_from_the_tool():
    anna = PersonFactory()
    result = remember("The spare key for the cellar is in the blue tin", speaker=anna, source_ref="conversation:7")
    memory = result.memory
    assert result.outcome == StoreOutcome.CREATED
    assert (memory.provenance, memory.source, memory.scope, memory.kind, memory.source_ref) == (
        "confirmed",
        "tool",
        "shared",
        "fact",
        "conversation:7",
    )
    assert memory.owner is None and memory.room is None
    assert AuditEvent.objects.get(memory_id=memory.pk).actor == f"person:{anna.pk}"


def test_private_belongs_to_the_speaker_and_room_to_the_room():
    anna, kitchen = PersonFactory(), RoomFactory()
    private = remember("I like my tea green", speaker=anna, room=kitchen, scope=Scope.PRIVATE).memory
    in_room = remember("The dishwasher salt is under the sink", speaker=anna, room=kitchen, scope=Scope.ROOM).memory
    assert (private.owner, private.room) == (anna, None)
    assert (in_room.owner, in_room.room) == (None, kitchen)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"scope": Scope.PRIVATE}, "scope"),  # unknown speaker
        ({"scope": Scope.SYSTEM}, "scope"),
        ({"kind": "rumour"}, "kind"),
        ({"language": "Deutsch"}, "language"),
    ],
)
def test_refused_requests_name_the_field_and_write_nothing(kwargs, field):
    with pytest.raises(ApplicationError) as excinfo:
        remember("My PIN is 1234", **kwargs)
    assert excinfo.value.field == field
    assert not Memory.objects.exists() and not AuditEvent.objects.exists()


def test_remember_merges_into_an_extracted_duplicate_and_confirms_it():
    extracted = memory_store(
        draft=MemoryDraft(content="The gate code is 4711", provenance=Provenance.EXTRACTED, source=Source.SESSION),
        actor="test",
    ).memory
    result = remember("the gate code is 4711")
    assert result.outcome == StoreOutcome.MERGED and result.memory.pk == extracted.pk
    extracted.refresh_from_db()
    assert (extracted.provenance, extracted.occurrences) == ("confirmed", 2)


def test_remember_lifts_the_blocks_the_speaker_could_have_made_and_no_others():
    anna, ben, kitchen, bath = PersonFactory(), PersonFactory(), RoomFactory(), RoomFactory()
    text = "The gate code is 4711"
    forgotten = [
        remember(text).memory,  # shared: Anna sees it
        remember(text, room=kitchen, scope=Scope.ROOM).memory,  # her room
        remember(text, room=bath, scope=Scope.ROOM).memory,  # another room
        remember(text, speaker=ben, scope=Scope.PRIVATE).memory,  # Ben's
    ]
    memories_forget(memory_ids=[m.pk for m in forgotten], actor="test")
    assert Tombstone.objects.count() == 4

    result = remember(text, speaker=anna, room=kitchen)

    assert result.outcome == StoreOutcome.CREATED and len(result.lifted_tombstones) == 2
    assert set(Tombstone.objects.values_list("scope", "room", "owner")) == {
        (Scope.ROOM, bath.pk, None),
        (Scope.PRIVATE, None, ben.pk),
    }
    assert AuditEvent.objects.filter(action="block_lifted").count() == 2


def test_an_unrelated_remember_lifts_nothing():
    memories_forget(memory_ids=[remember("The gate code is 4711").memory.pk], actor="test")
    result = remember("Julian likes short answers")
    assert result.lifted_tombstones == [] and Tombstone.objects.count() == 1


def test_a_scope_without_its_holder_names_what_it_needs():
    """The store's one holder rule answers for remember too: the scope is at fault, the speaker is needed (a caller
    always has its room; the room case is the store's, test_edit.py)."""
    with pytest.raises(ApplicationError) as excinfo:
        remember("My PIN is 1234", speaker=None, scope=Scope.PRIVATE)
    assert (excinfo.value.field, excinfo.value.needs) == ("scope", "speaker_id")
    assert not Memory.objects.exists()
