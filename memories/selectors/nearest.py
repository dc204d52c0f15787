"""Nearest memories by vector, correct under any filter: HNSW iterative scans, or an exact scan for small sets."""

import logging

from django.db.models import Exists, FloatField, Value
from django.db.models.expressions import ExpressionWrapper
from pgvector.django import CosineDistance

logger = logging.getLogger(__name__)

# Below this many rows in the filtered set, rank them exactly instead of walking the HNSW graph: the
# graph walk would visit (up to hnsw.max_scan_tuples) mostly filtered-out rows before giving up. Kept
# low because counting up to it is paid on every call; above it the iterative scan finds ``limit`` rows
# within hnsw.max_scan_tuples (20,000) as long as 1 row in 1,000 passes the filter (at 100k memories).
EXACT_SCAN_BELOW = 100


def nearest_memories(*, candidates, embedding, limit: int, min_similarity: float = -1.0) -> list[tuple[int, float]]:
    """(id, similarity) of the ``limit`` candidates nearest to ``embedding`` with similarity >= ``min_similarity``.

    ``candidates`` is any Memory queryset (a visibility filter, one owner's scope). It returns as many
    rows as exist, up to ``limit``: small sets are ranked exactly; large ones by the HNSW index with
    pgvector's iterative scan (hnsw.iterative_scan, see settings), and exactly when that comes up short.
    One statement in the usual case: both plans are in it, and PostgreSQL runs the one whose gate
    (are there EXACT_SCAN_BELOW candidates?) holds. The similarity floor is applied afterwards, not in
    the WHERE clause, so the index scan stops after ``limit`` rows instead of searching the graph for
    rows that pass the floor.
    """
    distance = CosineDistance("embedding", embedding)
    # "+ 0" makes an expression no index can serve, so PostgreSQL ranks the filtered rows exactly.
    exact = ExpressionWrapper(distance + Value(0.0), output_field=FloatField())
    large = Exists(candidates.order_by().values("pk")[EXACT_SCAN_BELOW - 1 : EXACT_SCAN_BELOW])
    by_index = _nearest(candidates.filter(large).annotate(distance=distance, exact=Value(False)), limit)
    # Only ever run on fewer than EXACT_SCAN_BELOW rows; saying so keeps the planner from a parallel plan.
    few = candidates.model.objects.filter(pk__in=candidates.order_by().values("pk")[:EXACT_SCAN_BELOW])
    by_scan = _nearest(few.filter(~large).annotate(distance=exact, exact=Value(True)), limit)
    rows = list(by_index.union(by_scan, all=True))
    if len(rows) < limit and not any(was_exact for _, _, was_exact in rows):
        logger.info("nearest memories: the index scan returned %d of %d rows; ranking exactly", len(rows), limit)
        rows = list(_nearest(candidates.annotate(distance=exact, exact=Value(True)), limit))
    rows.sort(key=lambda row: (row[1], row[0]))  # relaxed_order scans may return rows slightly out of order
    return [(pk, 1 - d) for pk, d, _ in rows if 1 - d >= min_similarity]


def _nearest(queryset, limit: int):
    return queryset.order_by("distance").values_list("pk", "distance", "exact")[:limit]
