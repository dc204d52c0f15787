"""Near-duplicate candidates for consolidation: pairs within small clusters of similar memories, in SQL.

Comparing every memory with every other one grows with the square of their number, and an HNSW
neighbour query per memory costs more per memory the larger its graph (and at 100k memories 7 % of
those searches ended in the wrong part of it). Instead, in three steps:

1. **Centroids.** Every CLUSTER_SIZE-th active memory (in id order) lends its vector to a centroid.
2. **Clusters.** Each active memory belongs to the cluster of its nearest centroid, and to those of
   the next nearest too (up to NEAREST in all) that are hardly farther (MARGIN): near-identical
   memories next to a border between clusters still meet in one of them. The distances to the
   centroids are one matrix product per batch of memories, in numpy (the vectors read in
   pgvector's binary form); ~1.5 clusters a memory.
3. **Pairs.** Per batch of whole clusters, one SQL self-join of their members on cluster, scope,
   owner and room keeps the pairs within the duplicate threshold: every pair compared in PostgreSQL,
   but only within a cluster (~CLUSTER_SIZE memories).

The comparisons grow with the number of memories times the cluster size; the arithmetic of step 2
with the number of memories times the number of centroids (0.6 s at 100k memories, so about a
minute at a million). Steps 2 and 3 run on two connections on a large table. Like any approximate
search it can miss a pair: near-identical memories that share none of their nearest centroids
within MARGIN. The caller judges the candidates again under lock (``pairs_within``): the data may
change between the search and the merge. Nothing is written: no work table; the vectors stay in
this process for the length of the search.
"""

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from django.db import DatabaseError, connection

from memories.models import Memory
from memories.scopes import duplicate_scope_columns, duplicate_scope_join

CLUSTER_SIZE = 250  # active memories per centroid
# A memory joins the clusters of its NEAREST nearest centroids that are at most MARGIN (cosine
# distance) farther than the nearest. Centroids are other memories, mostly ~0.6 away and within
# a few hundredths of each other, so two near-identical memories can rank them differently: with the
# nearest two within 0.03, 13 of 5,306 planted pairs at 100k memories shared no cluster (all of them
# reworded, similarity < 0.96); with up to four within 0.02-0.025, none, at 1.4-1.5 clusters a memory.
NEAREST = 4
MARGIN = 0.025
ASSIGN_BATCH = 5000  # memories per clustering batch: one read of their vectors, one matrix product
PAIRS_BATCH = 4000  # cluster members (whole clusters) per pairing statement: ~8 MB of vectors
WORKERS = 2
PARALLEL_FROM = 5000  # active memories; below this one connection is quick enough

# pgvector's binary form of each vector (vector_send: int16 dimensions, int16 unused, then big-endian
# float4s): no decimals to print and parse, and the same float32 values as stored.
VECTORS_SQL = """
SELECT id, vector_send(embedding) FROM memories_memory WHERE id = ANY(%(ids)s::bigint[]) AND status = 'active'
"""

# ``member`` holds a copy of each vector (subvector of all of it): the stored one is TOASTed and would
# be read and unpacked again for every comparison. Owner and room are never 0 (ids start at 1). The
# ids twice: "m.id = ANY" reads just those rows by primary key, the join adds their clusters.
PAIRS_SQL = f"""
WITH member AS MATERIALIZED (
    SELECT w.cluster, m.id, {duplicate_scope_columns("m")},
           subvector(m.embedding, 1, vector_dims(m.embedding)) AS embedding
    FROM unnest(%(clusters)s::integer[], %(ids)s::bigint[]) AS w(cluster, id)
    JOIN memories_memory m ON m.id = w.id
    WHERE m.id = ANY(%(ids)s::bigint[]) AND m.status = 'active'
)
SELECT x.id, y.id
FROM member x
JOIN member y ON y.cluster = x.cluster AND {duplicate_scope_join("x", "y")} AND y.id > x.id
WHERE (x.embedding <=> y.embedding) <= %(max_distance)s
"""

PAIRS_SETTINGS = {
    "work_mem": "64MB",  # the batch's vectors and the join's hash or sorts in memory, not in temp files
    # The planner cannot know how many rows ``member`` holds; a nested loop over it would compare all
    # pairs of the batch, not only those in the same cluster, scope, owner and room.
    "enable_nestloop": "off",
}

PAIRS_WITHIN_SQL = """
SELECT p.a, p.b, 1 - (x.embedding <=> y.embedding)
FROM unnest(%(a)s::bigint[], %(b)s::bigint[]) AS p(a, b)
JOIN memories_memory x ON x.id = p.a
JOIN memories_memory y ON y.id = p.b
WHERE 1 - (x.embedding <=> y.embedding) >= %(threshold)s
"""

Pair = tuple[int, int]
Progress = Callable[[str, int, int], None]
Batch = tuple[int, dict]  # (its size for progress, the step's parameters)
Step = Callable[..., list[tuple]]  # (cursor, parameters) -> rows


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


_DEFAULTS = {"enable_nestloop": "on", "work_mem": "4MB"}


def unit_vectors(cursor, ids: list[int]) -> tuple[list[int], np.ndarray]:
    """The active ones of ``ids`` and their vectors scaled to length 1 (a row each), as float32."""
    cursor.execute(VECTORS_SQL, {"ids": ids})
    rows = cursor.fetchall()
    if not rows:
        return [], np.empty((0, 0), dtype=np.float32)
    raw = np.frombuffer(b"".join(memoryview(vector)[4:] for _, vector in rows), dtype=">f4")
    vectors = raw.reshape(len(rows), -1).astype(np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), np.float32(1e-12))
    return [pk for pk, _ in rows], vectors


def _clusters(vectors: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, cluster) of each vector's nearest centroid, and of its next NEAREST - 1 within MARGIN of it."""
    if len(centroids) <= 1:  # one cluster (or none left: a race with a forget)
        return np.arange(len(vectors)), np.zeros(len(vectors), dtype=np.int64)
    distance = 1.0 - vectors @ centroids.T
    k = min(NEAREST, len(centroids))
    nearest = np.argpartition(distance, k - 1, axis=1)[:, :k]
    near = np.take_along_axis(distance, nearest, axis=1)
    rows, which = np.nonzero(near <= near.min(axis=1, keepdims=True) + MARGIN)
    return rows, nearest[rows, which]


def _run(
    step: Step, batches: list[Batch], *, settings: dict[str, str], parallel: bool, stage: str, progress: Progress
) -> list[tuple]:
    """The rows of ``step(cursor, params)`` for every batch: on WORKERS connections of their own when ``parallel``."""
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
                    found = step(cursor, params)
                except BaseException:
                    while not pending.empty():  # the other workers stop too
                        pending.get_nowait()
                    raise
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


def _assign(cursor, params: dict) -> list[tuple[int, int]]:
    """(cluster, id) of the memories ``params["ids"]``: see _clusters."""
    ids, vectors = unit_vectors(cursor, params["ids"])
    if not ids:
        return []
    rows, clusters = _clusters(vectors, params["centroids"])
    return [(int(cluster), ids[row]) for row, cluster in zip(rows, clusters, strict=True)]


def _pair(cursor, params: dict) -> list[tuple[int, int]]:
    cursor.execute(PAIRS_SQL, params)
    return cursor.fetchall()


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
    with connection.cursor() as cursor:
        _, centroids = unit_vectors(cursor, ids[::CLUSTER_SIZE])
    batches = [
        (len(ids[start : start + ASSIGN_BATCH]), {"ids": ids[start : start + ASSIGN_BATCH], "centroids": centroids})
        for start in range(0, len(ids), ASSIGN_BATCH)
    ]
    members = _run(_assign, batches, settings={}, parallel=parallel, stage="clusters", progress=report)
    pairs = _run(
        _pair,
        _pairs_batches(members, 1 - threshold),
        settings=PAIRS_SETTINGS,
        parallel=parallel,
        stage="pairs",
        progress=report,
    )
    return set(pairs)


def pairs_within(*, pairs: set[Pair], threshold: float) -> dict[Pair, float]:
    """Those of ``pairs`` whose memories both exist and are within ``threshold`` now, with their similarity."""
    result: dict[Pair, float] = {}
    ordered = sorted(pairs)
    with connection.cursor() as cursor:
        for start in range(0, len(ordered), 10_000):
            chunk = ordered[start : start + 10_000]
            cursor.execute(
                PAIRS_WITHIN_SQL,
                {"a": [a for a, _ in chunk], "b": [b for _, b in chunk], "threshold": threshold},
            )
            result.update(((a, b), similarity) for a, b, similarity in cursor.fetchall())
    return result
