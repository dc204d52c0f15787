"""Near-duplicate candidates for consolidation: HNSW neighbour queries per memory, never all pairs.

For each active memory, its few nearest active memories come from the HNSW index (``ORDER BY
embedding <=> m.embedding LIMIT k`` in a LATERAL subquery, a batch of memories per statement); the
pairs within the duplicate threshold and of the same scope, owner and room are the candidates.
Memories whose search did not find themselves are searched again in a second graph (binary_index).
The queries only read, so on a large table they run on two connections in parallel (PostgreSQL
will not run a LIMIT subquery in its own parallel workers). The caller judges the candidates again
under lock (``pairs_within``): the data may change between the search and the merge.
"""

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from django.db import DatabaseError, connection

from memories import binary_index
from memories.models import Memory
from memories.services.embeddings import embedding_column_dim

# Nearest neighbours fetched per memory (itself included). Duplicates are a memory's very nearest
# rows, so a handful is enough; a memory whose k nearest are all near-identical is asked again for
# NEIGHBOURS_CROWDED, since more may lie beyond them (say copies in other scopes crowding out its own).
NEIGHBOURS = 4
NEIGHBOURS_CROWDED = 64
# HNSW search breadth: the cost grows with it. The query is a memory's own vector, so a search
# that does not return the memory itself got lost in the graph (~7 % at 100k memories, none at
# 10k). Only those are searched again: first in the second graph of binary_index (its own graph,
# so mostly not lost in the same place; 9 in 10 found at the cost of a plain search), then what is
# still lost with wide searches, of the sign bits first (~3 times cheaper per search than the
# vectors' at the same breadth, and at 100k it found 56 of the pairs where the vectors found 53),
# then of the vectors for the few still lost. Searching them all again in the vector index
# instead, wider and wider, cost a quarter of a 100k run. Recall's own setting is restored afterwards.
EF_SEARCH = 16
EF_SEARCH_BINARY = 16
EF_SEARCH_LAST = 100
BATCH_SIZE = 1000
WORKERS = 2
PARALLEL_FROM = 5000  # active memories; below this one connection is quick enough

# Scope, owner, room and the threshold are checked outside the subquery: inside, they would make the
# planner drop the vector index, or make pgvector's iterative scan hunt for rows that do not exist
# (most memories have no duplicate) at many times the cost.
# ``{order}`` is the ordering the index serves: cosine distance (the vector index) or Hamming
# distance of the sign bits (binary_index); the threshold is always checked on the vectors.
NEIGHBOURS_SQL = """
SELECT m.id, n.id,
       n.scope = m.scope AND n.owner_id IS NOT DISTINCT FROM m.owner_id AND n.room_id IS NOT DISTINCT FROM m.room_id
FROM memories_memory m
CROSS JOIN LATERAL (
    SELECT c.id, c.scope, c.owner_id, c.room_id, c.embedding <=> m.embedding AS distance
    FROM memories_memory c
    WHERE c.status = 'active'
    ORDER BY {order}
    LIMIT %(k)s
) n
WHERE m.id = ANY(%(ids)s) AND n.distance <= %(max_distance)s
"""
VECTOR_ORDER = "c.embedding <=> m.embedding"


def neighbours_sql(*, binary_dim: int | None = None) -> str:
    """NEIGHBOURS_SQL ordered for the vector index, or for binary_index at ``binary_dim`` dimensions."""
    if binary_dim is None:
        return NEIGHBOURS_SQL.format(order=VECTOR_ORDER)
    order = f"{binary_index.expression('c', binary_dim)} <~> {binary_index.expression('m', binary_dim)}"
    return NEIGHBOURS_SQL.format(order=order)


PAIRS_WITHIN_SQL = """
SELECT p.a, p.b
FROM unnest(%(a)s::bigint[], %(b)s::bigint[]) AS p(a, b)
JOIN memories_memory x ON x.id = p.a
JOIN memories_memory y ON y.id = p.b
WHERE (x.embedding <=> y.embedding) <= %(max_distance)s
"""

Pair = tuple[int, int]


def _batches(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), BATCH_SIZE):
        yield ids[start : start + BATCH_SIZE]


@contextmanager
def _search_settings(cursor, ef_search: int) -> Iterator[None]:
    """Settings for the neighbour queries on this connection; the previous values are put back after.

    pgvector's iterative scan stays as configured (relaxed_order, see settings): rows the index still
    holds but this transaction cannot see (deleted, not yet vacuumed) or that are not active would
    otherwise use up the search breadth and hide real neighbours.
    """
    wanted = {
        "hnsw.ef_search": str(ef_search),
        # On a few thousand rows the planner prefers a sequential scan and a sort per memory, which
        # reads every vector once per memory: 8 s instead of 0.15 s per 1000 memories at 2000 rows.
        "enable_seqscan": "off",
    }
    previous = {}
    for name, value in wanted.items():
        cursor.execute("SELECT current_setting(%s, true), set_config(%s, %s, false)", [name, name, value])
        previous[name] = cursor.fetchone()[0]
    try:
        yield
    finally:
        try:
            for name, value in previous.items():
                cursor.execute("SELECT set_config(%s, %s, false)", [name, value or _DEFAULTS[name]])
        except DatabaseError:
            pass  # an aborted transaction rolls the settings back itself


_DEFAULTS = {"hnsw.ef_search": "40", "enable_seqscan": "on"}


class _Search:
    """Collects pairs, lost and crowded memories from batches searched on one or more connections."""

    def __init__(self, *, threshold: float, parallel: bool, progress: Callable[[str, int, int], None]):
        self.threshold, self.parallel, self.progress = threshold, parallel, progress
        self.pairs: set[Pair] = set()
        self.lost: list[int] = []  # of the last run(): memories whose search did not find themselves
        self.crowded: list[int] = []  # of the last run(): memories whose k nearest were all near-identical
        self.done = self.total = 0
        self.stage: str | None = None
        self._lock = threading.Lock()

    def run(
        self, ids: list[int], *, k: int, ef_search: int, stage: str | None = None, binary_dim: int | None = None
    ) -> None:
        """Search the neighbours of ``ids`` (in binary_index when ``binary_dim``); on WORKERS connections when parallel."""
        self.lost, self.crowded, self.done, self.total, self.stage = [], [], 0, len(ids), stage
        sql = neighbours_sql(binary_dim=binary_dim)
        batches = list(_batches(ids))
        if self.parallel and len(batches) > 1:
            slices = [batches[i::WORKERS] for i in range(WORKERS)]
            with ThreadPoolExecutor(max_workers=WORKERS) as pool:
                for _ in pool.map(lambda part: self._search_on_own_connection(sql, part, k, ef_search), slices):
                    pass  # re-raises a worker's exception
        else:
            self._search(sql, batches, k, ef_search)

    def _search_on_own_connection(self, sql: str, batches: list[list[int]], k: int, ef_search: int) -> None:
        # A worker thread: Django gives it its own connection, closed here.
        try:
            self._search(sql, batches, k, ef_search)
        finally:
            connection.close()

    def _search(self, sql: str, batches: list[list[int]], k: int, ef_search: int) -> None:
        with connection.cursor() as cursor, _search_settings(cursor, ef_search):
            for batch in batches:
                cursor.execute(sql, {"k": k, "ids": batch, "max_distance": 1 - self.threshold})
                rows = cursor.fetchall()
                found_itself = {a for a, b, _ in rows if a == b}
                others = Counter(a for a, b, _ in rows if a != b)
                with self._lock:
                    self.pairs.update((min(a, b), max(a, b)) for a, b, same_scope in rows if same_scope and a != b)
                    self.lost += [a for a in batch if a not in found_itself]
                    self.crowded += [a for a, count in others.items() if count >= k - 1]
                    self.done += len(batch)
                    if self.stage:
                        self.progress(self.stage, self.done, self.total)


def near_duplicate_pairs(*, threshold: float, progress: Callable[[str, int, int], None] | None = None) -> set[Pair]:
    """Pairs (low id, high id) of active memories, same scope/owner/room, with similarity >= ``threshold``.

    Approximate like any HNSW search, but a search that misses the memory itself is repeated in the
    second graph (binary_index), then wider in both graphs. Runs on two connections when the table is large and
    the caller is outside a transaction (other connections cannot see uncommitted rows).
    """
    ids = list(Memory.objects.active().order_by("pk").values_list("pk", flat=True))
    parallel = len(ids) >= PARALLEL_FROM and not connection.in_atomic_block
    search = _Search(threshold=threshold, parallel=parallel, progress=progress or (lambda *args: None))
    search.run(ids, k=NEIGHBOURS, ef_search=EF_SEARCH, stage="neighbours")
    crowded = search.crowded
    binary_dim = embedding_column_dim() if search.lost else None  # only the repeat searches need it
    for ef_search, stage in (
        (EF_SEARCH_BINARY, "searching lost ones again (sign bits)"),
        (EF_SEARCH_LAST, f"searching lost ones again (sign bits, ef_search {EF_SEARCH_LAST})"),
    ):
        if search.lost:
            search.run(sorted(search.lost), k=NEIGHBOURS, ef_search=ef_search, stage=stage, binary_dim=binary_dim)
            crowded += search.crowded
    if search.lost:
        search.run(
            sorted(search.lost),
            k=NEIGHBOURS,
            ef_search=EF_SEARCH_LAST,
            stage=f"searching lost ones again (ef_search {EF_SEARCH_LAST})",
        )
        crowded += search.crowded
    if crowded:
        search.run(sorted(set(crowded)), k=NEIGHBOURS_CROWDED, ef_search=EF_SEARCH_LAST)
    return search.pairs


def pairs_within(*, pairs: set[Pair], threshold: float) -> set[Pair]:
    """Those of ``pairs`` whose memories both exist and are within ``threshold`` now."""
    result: set[Pair] = set()
    ordered = sorted(pairs)
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), 10 * BATCH_SIZE):
            chunk = ordered[start : start + 10 * BATCH_SIZE]
            cursor.execute(
                PAIRS_WITHIN_SQL,
                {"a": [a for a, _ in chunk], "b": [b for _, b in chunk], "max_distance": 1 - threshold},
            )
            result.update(cursor.fetchall())
    return result
