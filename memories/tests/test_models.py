"""The schema as migrated on the real database: extension, indexes, generated column, constraints."""

import pytest
from django.db import IntegrityError, connection, transaction

from memories.models import AuditEvent, ConsolidationRun, Memory, Tombstone
from memories.tests.factories import MemoryFactory
from memories.tests.helpers import one_hot
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


def test_pgvector_extension_and_indexes_exist():
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'memories_memory'")
        indexdefs = [row[0] for row in cursor.fetchall()]
    assert any("USING hnsw" in d and "vector_cosine_ops" in d for d in indexdefs)
    assert any("USING gin" in d and "search_vector" in d for d in indexdefs)


def test_generated_full_text_column_uses_the_memory_language_and_simple():
    memory = MemoryFactory(content="Der Ersatzschlüssel liegt in den blauen Dosen 4711", language="de")
    vector = Memory.objects.filter(pk=memory.pk).values_list("search_vector", flat=True).get()
    assert "'dos'" in vector  # german stemming
    assert "'dosen'" in vector  # simple, as typed
    assert "'4711'" in vector


def _memory_kwargs(**overrides):
    kwargs = dict(
        content="x", language="en", embedding=one_hot(0), provenance="confirmed", source="tool", scope="shared"
    )
    kwargs.update(overrides)
    return kwargs


@pytest.mark.parametrize(
    "overrides",
    [
        {"kind": "rumour"},
        {"provenance": "hearsay"},
        {"source": "dream"},
        {"scope": "public"},
        {"status": "archived"},
        {"content": ""},
        {"language": "German"},
        {"confidence": 1.5},
        {"importance": -0.1},
        {"scope": "private"},  # no owner
        {"scope": "room"},  # no room
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_memory_constraints_reject_bad_rows(overrides):
    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.create(**_memory_kwargs(**overrides))


def test_scope_rules_reject_owner_or_room_where_they_do_not_belong():
    person, room = PersonFactory(), RoomFactory()
    for bad in (
        {"scope": "shared", "owner": person},
        {"scope": "system", "room": room},
        {"scope": "private", "owner": person, "room": room},
        {"scope": "room", "room": room, "owner": person},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            Memory.objects.create(**_memory_kwargs(**bad))
    Memory.objects.create(**_memory_kwargs(scope="private", owner=person))
    Memory.objects.create(**_memory_kwargs(scope="room", room=room))


def test_only_superseded_memories_point_to_a_successor():
    newer = Memory.objects.create(**_memory_kwargs())
    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.create(**_memory_kwargs(superseded_by=newer))
    Memory.objects.create(**_memory_kwargs(status="superseded", superseded_by=newer))


def test_tombstone_has_no_text_columns_and_enforces_scope():
    text_types = {"CharField", "TextField"}
    text_fields = {f.name for f in Tombstone._meta.concrete_fields if f.get_internal_type() in text_types}
    assert text_fields == {"embedder", "scope"}  # enumerations, never content
    with pytest.raises(IntegrityError), transaction.atomic():
        Tombstone.objects.create(embedding=one_hot(1), embedder="hash", scope="private")


def test_audit_trail_has_no_free_text():
    text_fields = {
        f.name for f in AuditEvent._meta.concrete_fields if f.get_internal_type() in {"CharField", "TextField"}
    }
    assert text_fields == {"action", "actor"}
    with pytest.raises(IntegrityError), transaction.atomic():
        AuditEvent.objects.create(memory_id=1, action="gossiped", actor="tool")


def test_consolidation_run_status_is_an_enumeration():
    with pytest.raises(IntegrityError), transaction.atomic():
        ConsolidationRun.objects.create(started_by="command", status="sleeping")
