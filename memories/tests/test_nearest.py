"""nearest_memories_many: the exact-or-index choice follows the real size of the filtered set."""

import numpy as np
import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext

from memories.models import Memory, Scope
from memories.selectors import nearest
from memories.selectors.nearest import nearest_memories_many
from people.tests.factories import PersonFactory

pytestmark = pytest.mark.django_db


def planner_setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


def test_a_large_set_is_searched_through_the_index_whatever_the_planner_estimates():
    anna = PersonFactory()
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(2 * nearest.EXACT_SCAN_BELOW, 512)).astype(np.float32)
    Memory.objects.bulk_create(
        Memory(content=f"fact {i}", embedding=v, provenance="confirmed", source="tool", scope=Scope.PRIVATE, owner=anna)
        for i, v in enumerate(vectors)
    )
    annas = Memory.objects.active().filter(owner=anna)
    queries = rng.normal(size=(3, 512)).astype(np.float32)
    with CaptureQueriesContext(connection) as captured:
        found = nearest_memories_many(searches=[(annas, q) for q in queries], limit=5)
    assert all(len(rows) == 5 for rows in found)
    # Never left behind for the statements that follow.
    assert (planner_setting("enable_seqscan"), planner_setting("enable_sort")) == ("on", "on")
    [sent] = [q["sql"] for q in captured.captured_queries if "JOIN LATERAL" in q["sql"]]
    assert sent.startswith(nearest.FORCE_INDEX_SQL + "; ") and sent.endswith("; " + nearest.RESET_PLANNER_SQL)
    search = sent.removeprefix(nearest.FORCE_INDEX_SQL + "; ").removesuffix("; " + nearest.RESET_PLANNER_SQL)
    with connection.cursor() as cursor:
        cursor.execute(nearest.FORCE_INDEX_SQL)
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + search)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(nearest.RESET_PLANNER_SQL)
    # The large set's branch runs on the HNSW index.
    assert "Index Scan using memory_embedding_hnsw" in plan
    # The index finds the nearest ones (an exact ranking agrees on the first).
    for query, rows in zip(queries, found, strict=True):
        exact = min(
            Memory.objects.filter(owner=anna),
            key=lambda m: float(np.dot(m.embedding, query) / np.linalg.norm(m.embedding) / np.linalg.norm(query)) * -1,
        )
        assert rows[0][0] == exact.pk


def test_a_failed_search_leaves_the_rollback_to_revert_the_settings(monkeypatch):
    monkeypatch.setattr(nearest, "BRANCH_SQL", nearest.BRANCH_SQL.replace("LIMIT %(limit)s", "LIMIT 'x'", 1))
    with pytest.raises(DatabaseError), transaction.atomic():
        nearest_memories_many(searches=[(Memory.objects.all(), np.ones(512, dtype=np.float32))], limit=5)
    assert (planner_setting("enable_seqscan"), planner_setting("enable_sort")) == ("on", "on")


def rows_fetched_by_index_scans() -> int:
    """Heap rows that index scans of memories_memory fetched so far in this transaction (filtered out or not)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'memories_memory'")
        return cursor.fetchone()[0]


def test_a_small_set_in_a_large_table_is_probed_through_its_own_index():
    ben = PersonFactory()
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(10 * nearest.EXACT_SCAN_BELOW + 3, 512)).astype(np.float32)
    Memory.objects.bulk_create(
        Memory(
            content=f"fact {i}",
            embedding=v,
            provenance="confirmed",
            source="tool",
            scope=Scope.PRIVATE if i < 3 else Scope.SHARED,
            owner=ben if i < 3 else None,
        )
        for i, v in enumerate(vectors)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    before = rows_fetched_by_index_scans()
    [found] = nearest_memories_many(searches=[(Memory.objects.active().filter(owner=ben), vectors[0])], limit=5)
    assert len(found) == 3 and found[0][1] == pytest.approx(1.0, abs=1e-5)
    # Ben's three rows, by the probe (its bounded look at the first ids, then the index) and by the exact
    # ranking, and the table's first id; not the table's thousand shared rows.
    assert rows_fetched_by_index_scans() - before <= 12


@pytest.mark.django_db(transaction=True)
def test_a_small_set_is_probed_in_bounded_work_when_the_statistics_count_rows_that_are_gone():
    """A newcomer after a large change: the statistics still say most memories are shared (visible to them), so
    a probe left to the planner walked the whole primary key; it looks at PROBE_WINDOW ids, then the index."""
    anna, ben = PersonFactory(), PersonFactory()
    rng = np.random.default_rng(7)
    size = 3 * nearest.PROBE_WINDOW
    vectors = rng.normal(size=(size + 3, 512)).astype(np.float32)
    Memory.objects.bulk_create(
        Memory(
            content=f"fact {i}",
            embedding=v,
            provenance="confirmed",
            source="tool",
            scope=Scope.PRIVATE if i >= size else Scope.SHARED,
            owner=ben if i >= size else None,
        )
        for i, v in enumerate(vectors)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("UPDATE memories_memory SET scope = 'private', owner_id = %s WHERE scope = 'shared'", [anna.pk])
        cursor.execute("VACUUM memories_memory")  # no ANALYZE: the statistics still count the shared rows
    with transaction.atomic():
        before = rows_fetched_by_index_scans()
        [found] = nearest_memories_many(
            searches=[(Memory.objects.visible_to(speaker=ben, room=None).active(), vectors[-1])], limit=5
        )
        fetched = rows_fetched_by_index_scans() - before
    assert len(found) == 3 and found[0][1] == pytest.approx(1.0, abs=1e-5)
    # The window, then Ben's three rows by the index and by the exact ranking; not the table's other rows.
    assert fetched <= nearest.PROBE_WINDOW + 10


def test_the_where_clause_is_kept_per_queryset_and_a_further_filter_compiles_its_own():
    anna = PersonFactory()
    active = Memory.objects.active()
    where = nearest.table_where(active)
    assert nearest.table_where(active) is where
    annas = active.filter(owner=anna)
    assert nearest.table_where(annas) != where and anna.pk in nearest.table_where(annas)[1]
    assert nearest.table_where(active.none()) is None
