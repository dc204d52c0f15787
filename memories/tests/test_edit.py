"""memory_edit (re-embed, duplicate re-check, audit) and memory_note_add (a note through memory_store)."""

import numpy as np
import pytest

from justai_core.errors import ApplicationError
from memories.embedders import get_embedder
from memories.models import AuditEvent, Kind, Memory, Provenance, Scope, Source, Status
from memories.services.edit import MemoryChanges, memory_edit, memory_note_add
from memories.services.forget import memories_forget
from memories.services.store import MemoryDraft, memory_store
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


def actions(memory_id):
    return list(AuditEvent.objects.filter(memory_id=memory_id).order_by("id").values_list("action", flat=True))


def test_editing_the_text_re_embeds_and_audits_edited(e5):
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    result = memory_edit(
        memory=memory, actor="admin:1", changes=MemoryChanges(content="  The cellar key is in the red tin  ")
    )
    memory.refresh_from_db()
    assert result.changed == ["content"] and memory.content == "The cellar key is in the red tin"
    expected = get_embedder().embed_documents([memory.content])[0]
    assert np.allclose(np.asarray(memory.embedding), expected, atol=1e-6)
    assert actions(memory.pk) == ["edited"]
    assert AuditEvent.objects.get(memory_id=memory.pk).actor == "admin:1"


def test_an_edit_without_changes_writes_nothing(e5):
    memory = MemoryFactory(content="The cellar key is in the blue tin", importance=0.5)
    result = memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(content=memory.content, importance=0.5))
    assert result.changed == [] and not AuditEvent.objects.exists()


def test_changing_a_score_keeps_the_vector(e5):
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    before = np.asarray(memory.embedding)
    memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(importance=0.9, provenance=Provenance.CONFIRMED))
    memory.refresh_from_db()
    assert memory.importance == 0.9 and np.allclose(np.asarray(memory.embedding), before)


def test_an_edit_that_makes_a_duplicate_merges_the_other_into_the_edited_one(meaning):
    kept = MemoryFactory(content="The gate code is 4711 now", provenance=Provenance.INFERRED, access_count=2)
    other = MemoryFactory(content="The gate code is 4711", provenance=Provenance.CONFIRMED, access_count=3)
    older = MemoryFactory(content="The gate code was 1234", status=Status.SUPERSEDED, superseded_by=other)

    result = memory_edit(memory=kept, actor="admin:7", changes=MemoryChanges(content="the gate code is 4711"))

    assert result.merged_ids == [other.pk]
    assert not Memory.objects.filter(pk=other.pk).exists()
    kept.refresh_from_db()
    # The admin's text stays; the higher provenance, the counts and the successor link are merged in.
    assert kept.content == "the gate code is 4711"
    assert (kept.provenance, kept.access_count, kept.occurrences) == ("confirmed", 5, 2)
    older.refresh_from_db()
    assert older.superseded_by_id == kept.pk
    assert actions(kept.pk) == ["edited", "merged"]
    assert AuditEvent.objects.get(memory_id=other.pk).related_memory_id == kept.pk


def test_different_numbers_are_not_merged_by_an_edit(meaning):
    kept = MemoryFactory(content="The gate code is 4711 now")
    other = MemoryFactory(content="The gate code is 4712")
    result = memory_edit(memory=kept, actor="admin:1", changes=MemoryChanges(content="The gate code is 4711"))
    assert result.merged_ids == [] and Memory.objects.filter(pk=other.pk).exists()


def test_a_duplicate_in_another_scope_is_not_merged(meaning):
    anna = PersonFactory()
    private = MemoryFactory(content="I like green tea", scope=Scope.PRIVATE, owner=anna)
    shared = MemoryFactory(content="Green tea is liked")
    result = memory_edit(memory=shared, actor="admin:1", changes=MemoryChanges(content="I like green tea"))
    assert result.merged_ids == [] and Memory.objects.filter(pk=private.pk).exists()


def test_a_superseded_memory_is_never_merged_into(meaning):
    newer = MemoryFactory(content="The gate code is 4711")
    old = MemoryFactory(content="The gate code was 1234", status=Status.SUPERSEDED, superseded_by=newer)
    result = memory_edit(memory=old, actor="admin:1", changes=MemoryChanges(content="The gate code is 4711"))
    assert result.merged_ids == [] and Memory.objects.count() == 2


@pytest.mark.meaning_blind("refused before anything is embedded")
def test_switching_scope_clears_owner_and_room_and_needs_them():
    anna, kitchen = PersonFactory(), RoomFactory()
    memory = MemoryFactory(content="I like green tea", scope=Scope.PRIVATE, owner=anna)
    memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(scope=Scope.ROOM, room=kitchen))
    memory.refresh_from_db()
    assert (memory.scope, memory.owner, memory.room) == ("room", None, kitchen)
    with pytest.raises(ApplicationError) as error:
        memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(scope=Scope.PRIVATE))
    assert "owner" in error.value.message.lower()
    memory.refresh_from_db()
    assert memory.scope == "room"


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(("content", "message"), [("   ", "must not be empty"), ("x" * 4001, "longer than")])
def test_bad_text_is_refused_and_nothing_changes(content, message):
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    with pytest.raises(ApplicationError, match=message):
        memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(content=content))
    memory.refresh_from_db()
    assert memory.content == "The cellar key is in the blue tin" and not AuditEvent.objects.exists()


@pytest.mark.meaning_blind("refused before anything is embedded")
def test_a_bad_language_is_refused_with_the_field():
    memory = MemoryFactory()
    with pytest.raises(ApplicationError) as error:
        memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(language="German"))
    assert error.value.field == "language"


def test_a_note_is_a_confirmed_admin_note_stored_through_memory_store(e5):
    kitchen = RoomFactory()
    result = memory_note_add(
        content="The router password is on the fridge", room=kitchen, scope=Scope.ROOM, actor="admin:3"
    )
    note = result.memory
    assert (note.kind, note.source, note.provenance, note.source_ref) == (
        Kind.NOTE,
        Source.ADMIN,
        Provenance.CONFIRMED,
        "admin:3",
    )
    assert note.room == kitchen and actions(note.pk) == ["created"]


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(("scope", "needs"), [(Scope.PRIVATE, "speaker_id"), (Scope.ROOM, "room_id")])
def test_a_note_without_its_scopes_holder_is_refused_and_nothing_is_stored(scope, needs):
    with pytest.raises(ApplicationError) as error:
        memory_note_add(content="The router password is on the fridge", scope=scope, actor="admin:3")
    assert (error.value.field, error.value.needs) == ("scope", needs)
    assert not Memory.objects.exists() and not AuditEvent.objects.exists()


@pytest.mark.meaning_blind("the note's language, settled before anything is embedded")
def test_a_note_is_in_the_language_of_its_owner_when_too_short_to_tell():
    giulia = PersonFactory(preferred_language="it")
    note = memory_note_add(content="ok", scope=Scope.PRIVATE, owner=giulia, actor="admin:3").memory
    assert note.language == "it"


def test_a_note_that_duplicates_a_memory_merges_into_it(meaning):
    existing = MemoryFactory(content="The router password is on the fridge", provenance=Provenance.EXTRACTED)
    result = memory_note_add(content="the router password is on the fridge", actor="admin:3")
    assert result.outcome == "merged" and result.memory.pk == existing.pk
    assert Memory.objects.get().provenance == "confirmed"


def test_a_note_covered_by_a_forget_block_is_refused(meaning):
    memory = MemoryFactory(content="The gate code is 4711")
    memories_forget(memory_ids=[memory.pk], actor="test")
    with pytest.raises(ApplicationError, match="forget block"):
        memory_note_add(content="The gate code is 4711", actor="admin:3")
    assert not Memory.objects.exists()


def test_an_edit_into_forgotten_content_is_refused_with_the_tombstone_and_nothing_changes(meaning):
    gone = MemoryFactory(content="Der Code für das Gartentor ist 4711.", language="de")
    [tombstone] = memories_forget(memory_ids=[gone.pk], actor="test")
    memory = MemoryFactory(content="Die Mülltonne steht hinter der Garage.", language="de")
    with pytest.raises(ApplicationError) as refused:
        memory_edit(
            memory=memory, actor="admin:1", changes=MemoryChanges(content="Der Code für das Gartentor ist 4711.")
        )
    assert f"#{tombstone.pk}" in refused.value.message and refused.value.field == "content"
    assert refused.value.status == 409
    memory.refresh_from_db()
    assert memory.content == "Die Mülltonne steht hinter der Garage." and actions(memory.pk) == []


def test_an_edit_that_carries_a_forgotten_value_is_refused_too(meaning):
    gone = MemoryFactory(content="Das WLAN-Passwort ist Zebra 98765 quokka.", language="de")
    [tombstone] = memories_forget(memory_ids=[gone.pk], actor="test")
    memory = MemoryFactory(content="Das Gästezimmer ist oben links.", language="de")
    with pytest.raises(ApplicationError, match=f"#{tombstone.pk}"):
        memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(content="Zebra: 98765"))


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "rumour"},
        {"provenance": "hearsay"},
        {"scope": "garden"},
        {"scope": Scope.PRIVATE},  # no owner
        {"scope": Scope.ROOM},  # no room
        {"language": "english"},
        {"confidence": 1.5},
        {"importance": -0.1},
        {"content": "   "},
    ],
)
def test_an_edit_is_refused_as_storing_the_same_fields_is(fields):
    """One validation for store and edit: the same field named, the same message, nothing changed."""
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    draft = MemoryDraft(content=memory.content, provenance=Provenance.CONFIRMED, source=Source.ADMIN)
    for name, value in fields.items():
        setattr(draft, name, value)
    with pytest.raises(ApplicationError) as stored:
        memory_store(draft=draft, actor="admin:1")
    with pytest.raises(ApplicationError) as edited:
        memory_edit(memory=memory, actor="admin:1", changes=MemoryChanges(**fields))
    assert (edited.value.field, edited.value.message) == (stored.value.field, stored.value.message)
    memory.refresh_from_db()
    assert memory.content == "The cellar key is in the blue tin" and actions(memory.pk) == []
