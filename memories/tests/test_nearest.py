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
