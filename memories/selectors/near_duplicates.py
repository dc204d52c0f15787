"""Near-duplicate candidates for consolidation: pairs within small clusters of similar memories, in SQL.

Comparing every memory with every other one grows with the square of their number, and an HNSW
neighbour query per memory costs more per memory the larger its graph (and at 100k memories 7 % of
those searches ended in the wrong part of it). Instead, in three steps:

1. **Centroids.** Every CLUSTER_SIZE-th active memory (in id order) lends its vector to a centroid:
   a small work table (``CENTROIDS``, unlogged) with its own HNSW index.
2. **Clusters.** Each active memory belongs to the cluster of its nearest centroid, and to that of
   its second nearest too when that one is hardly farther (MARGIN): near-identical memories next to
   a border between two clusters still meet in one of them. One LATERAL query per batch of
   memories; ~1.4 clusters a memory.
3. **Pairs.** Per batch of whole clusters, one self-join of their members on cluster, scope, owner
   and room keeps the pairs within the duplicate threshold: every pair compared in SQL, but only
   within a cluster (~CLUSTER_SIZE memories).

The work grows with the number of memories times the cluster size, plus one search among the
centroids per memory. Steps 2 and 3 only read, so on a large table they run on two connections
(PostgreSQL would not run them in its own parallel workers). Like any approximate search it can
miss a pair: near-identical memories whose nearest centroids differ by more than MARGIN
(bench/consolidate.py: more duplicates found than with an HNSW search per memory). The caller judges
the candidates again under lock (``pairs_within``): the data may change between the search and the
merge. The centroid table holds copies of one vector in CLUSTER_SIZE, no text; it is dropped when
the search ends (or, after a crash, when the next one starts). The caller holds the consolidation
lock, so no two searches share it.
"""

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from django.db import DatabaseError, connection

from memories.models import Memory

CLUSTER_SIZE = 250  # active memories per centroid
# How much farther (cosine distance) the second nearest centroid may be for a memory to join its
# cluster too. Near-identical memories are at most 0.08 apart (the duplicate threshold 0.92).
MARGIN = 0.03
# The centroids' HNSW graph (a few hundred centroids at 100k memories): 8 links a node and search
# breadth 24 cost 20 % less than the default 16 links and found 0.1 % fewer pairs at 100k.
CENTROID_EF_SEARCH = 24
CENTROID_M = 8
ASSIGN_BATCH = 5000  # memories per clustering statement
PAIRS_BATCH = 4000  # cluster members (whole clusters) per pairing statement: ~8 MB of vectors
WORKERS = 2
PARALLEL_FROM = 5000  # active memories; below this one connection is quick enough

CENTROIDS = "memories_duplicate_centroids"

CREATE_CENTROIDS_SQL = f"""
CREATE UNLOGGED TABLE {CENTROIDS} (cluster integer PRIMARY KEY, embedding vector({{dim:d}}) STORAGE PLAIN NOT NULL)
"""
FILL_CENTROIDS_SQL = f"""
INSERT INTO {CENTROIDS} (cluster, embedding)
SELECT row_number() OVER (ORDER BY id), embedding FROM memories_memory WHERE id = ANY(%(ids)s)
"""
INDEX_CENTROIDS_SQL = f"CREATE INDEX ON {CENTROIDS} USING hnsw (embedding vector_cosine_ops) WITH (m = {CENTROID_M})"

# The nearest two centroids of each memory; the second only within MARGIN of the first.
ASSIGN_SQL = f"""
SELECT c.cluster, m.id
FROM memories_memory m
CROSS JOIN LATERAL (
    SELECT cluster, distance, min(distance) OVER () AS nearest
    FROM (
        SELECT cluster, embedding <=> m.embedding AS distance
        FROM {CENTROIDS}
        ORDER BY embedding <=> m.embedding
        LIMIT 2
    ) AS two
) AS c
WHERE m.id = ANY(%(ids)s::bigint[]) AND m.status = 'active' AND c.distance <= c.nearest + %(margin)s
"""

# ``member`` holds a copy of each vector (subvector of all of it): the stored one is TOASTed and would
# be read and unpacked again for every comparison. Owner and room are never 0 (ids start at 1). The
# ids twice: "m.id = ANY" reads just those rows by primary key, the join adds their clusters.
PAIRS_SQL = """
WITH member AS MATERIALIZED (
    SELECT w.cluster, m.id, m.scope, coalesce(m.owner_id, 0) AS owner_key, coalesce(m.room_id, 0) AS room_key,
           subvector(m.embedding, 1, vector_dims(m.embedding)) AS embedding
    FROM unnest(%(clusters)s::integer[], %(ids)s::bigint[]) AS w(cluster, id)
    JOIN memories_memory m ON m.id = w.id
    WHERE m.id = ANY(%(ids)s::bigint[]) AND m.status = 'active'
)
SELECT x.id, y.id
FROM member x
JOIN member y ON y.cluster = x.cluster AND y.scope = x.scope AND y.owner_key = x.owner_key
    AND y.room_key = x.room_key AND y.id > x.id
WHERE (x.embedding <=> y.embedding) <= %(max_distance)s
"""

ASSIGN_SETTINGS = {
    "hnsw.ef_search": str(CENTROID_EF_SEARCH),
    # The centroid table is small, so the planner would rather read all of it and sort, per memory.
    "enable_seqscan": "off",
}
PAIRS_SETTINGS = {
    "work_mem": "64MB",  # the batch's vectors and the join's hash or sorts in memory, not in temp files
    # The planner cannot know how many rows ``member`` holds; a nested loop over it would compare all
    # pairs of the batch, not only those in the same cluster, scope, owner and room.
    "enable_nestloop": "off",
}

PAIRS_WITHIN_SQL = """
SELECT p.a, p.b
FROM unnest(%(a)s::bigint[], %(b)s::bigint[]) AS p(a, b)
JOIN memories_memory x ON x.id = p.a
JOIN memories_memory y ON y.id = p.b
WHERE (x.embedding <=> y.embedding) <= %(max_distance)s
"""

Pair = tuple[int, int]
Progress = Callable[[str, int, int], None]
Batch = tuple[int, dict]  # (its size for progress, the statement's parameters)


@contextmanager
def _session_settings(cursor, wanted: dict[str, str]) -> Iterator[None]:
    """``wanted`` settings on this connection for the block; the previous values are put back after."""
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


_DEFAULTS = {"hnsw.ef_search": "40", "enable_seqscan": "on", "enable_nestloop": "on", "work_mem": "4MB"}


@contextmanager
def _centroids(ids: list[int]) -> Iterator[None]:
    """The centroid table of the memories ``ids`` (clusters numbered from 1), dropped after the block."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {CENTROIDS}")  # left by a run that crashed
        cursor.execute("SELECT vector_dims(embedding) FROM memories_memory WHERE id = %s", [ids[0]])
        cursor.execute(CREATE_CENTROIDS_SQL.format(dim=cursor.fetchone()[0]))
        cursor.execute(FILL_CENTROIDS_SQL, {"ids": ids})
        cursor.execute(INDEX_CENTROIDS_SQL)
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE IF EXISTS {CENTROIDS}")
        except DatabaseError:
            pass  # in an aborted transaction: its rollback drops the table


def _run(
    sql: str, batches: list[Batch], *, settings: dict[str, str], parallel: bool, stage: str, progress: Progress
) -> list[tuple]:
    """The rows of ``sql`` run once per batch: on WORKERS connections of their own when ``parallel``."""
    pending: queue.SimpleQueue[Batch] = queue.SimpleQueue()
    for batch in batches:
        pending.put(batch)
    rows: list[tuple] = []
    lock = threading.Lock()
    total = sum(size for size, _ in batches)
    done = 0

    def work() -> None:
        nonlocal done
        with connection.cursor() as cursor, _session_settings(cursor, settings):
            while True:
                try:
                    size, params = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    cursor.execute(sql, params)
                except BaseException:
                    while not pending.empty():  # the other workers stop too
                        pending.get_nowait()
                    raise
                found = cursor.fetchall()
                with lock:
                    rows.extend(found)
                    done += size
                    progress(stage, done, total)

    def work_on_own_connection() -> None:
        # A worker thread: Django gives it its own connection, closed here.
        try:
            work()
        finally:
            connection.close()

    progress(stage, 0, total)
    if parallel and len(batches) > 1:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            for future in [pool.submit(work_on_own_connection) for _ in range(WORKERS)]:
                future.result()  # re-raises a worker's exception
    else:
        work()
    return rows


def _assign_batches(ids: list[int]) -> list[Batch]:
    return [
        (len(ids[start : start + ASSIGN_BATCH]), {"ids": ids[start : start + ASSIGN_BATCH], "margin": MARGIN})
        for start in range(0, len(ids), ASSIGN_BATCH)
    ]


def _pairs_batches(members: list[tuple[int, int]], max_distance: float) -> list[Batch]:
    """Whole clusters, up to PAIRS_BATCH members a batch (a larger cluster alone), largest batches first."""
    by_cluster: dict[int, list[int]] = {}
    for cluster, pk in members:
        by_cluster.setdefault(cluster, []).append(pk)
    batches: list[Batch] = []
    clusters: list[int] = []
    ids: list[int] = []
    for cluster in sorted(by_cluster):
        if ids and len(ids) + len(by_cluster[cluster]) > PAIRS_BATCH:
            batches.append((len(set(clusters)), {"clusters": clusters, "ids": ids, "max_distance": max_distance}))
            clusters, ids = [], []
        clusters += [cluster] * len(by_cluster[cluster])
        ids += by_cluster[cluster]
    if ids:
        batches.append((len(set(clusters)), {"clusters": clusters, "ids": ids, "max_distance": max_distance}))
    # Largest first, so that the workers finish at about the same time.
    return sorted(batches, key=lambda batch: len(batch[1]["ids"]), reverse=True)


def near_duplicate_pairs(*, threshold: float, progress: Progress | None = None) -> set[Pair]:
    """Pairs (low id, high id) of active memories, same scope/owner/room, with similarity >= ``threshold``.

    Approximate (see the module's description). Runs on two connections when the table is large and
    the caller is outside a transaction (other connections cannot see uncommitted rows). Progress
    stages: "clusters" (memories), then "pairs" (clusters).
    """
    report = progress or (lambda stage, done, total: None)
    ids = list(Memory.objects.active().order_by("pk").values_list("pk", flat=True))
    if len(ids) < 2:
        return set()
    parallel = len(ids) >= PARALLEL_FROM and not connection.in_atomic_block
    with _centroids(ids[::CLUSTER_SIZE]):
        members = _run(
            ASSIGN_SQL,
            _assign_batches(ids),
            settings=ASSIGN_SETTINGS,
            parallel=parallel,
            stage="clusters",
            progress=report,
        )
    pairs = _run(
        PAIRS_SQL,
        _pairs_batches(members, 1 - threshold),
        settings=PAIRS_SETTINGS,
        parallel=parallel,
        stage="pairs",
        progress=report,
    )
    return set(pairs)


def pairs_within(*, pairs: set[Pair], threshold: float) -> set[Pair]:
    """Those of ``pairs`` whose memories both exist and are within ``threshold`` now."""
    result: set[Pair] = set()
    ordered = sorted(pairs)
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), 10_000):
            chunk = ordered[start : start + 10_000]
            cursor.execute(
                PAIRS_WITHIN_SQL,
                {"a": [a for a, _ in chunk], "b": [b for _, b in chunk], "max_distance": 1 - threshold},
            )
            result.update(cursor.fetchall())
    return result
