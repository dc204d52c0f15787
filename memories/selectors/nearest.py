"""Nearest memories by vector, correct under any filter: HNSW iterative scans, or an exact scan for small sets."""

import logging

from django.db.models import FloatField, Value
from django.db.models.expressions import ExpressionWrapper
from pgvector.django import CosineDistance

logger = logging.getLogger(__name__)

# Below this many rows in the filtered set, rank them exactly instead of walking the HNSW graph: the
# graph walk would visit (up to hnsw.max_scan_tuples) mostly filtered-out rows before giving up.
EXACT_SCAN_BELOW = 1000


def nearest_memories(*, candidates, embedding, limit: int, min_similarity: float = -1.0) -> list[tuple[int, float]]:
    """(id, similarity) of the ``limit`` candidates nearest to ``embedding`` with similarity >= ``min_similarity``.

    ``candidates`` is any Memory queryset (a visibility filter, one owner's scope). It returns as many
    rows as exist, up to ``limit``: small sets are ranked exactly; large ones by the HNSW index with
    pgvector's iterative scan (hnsw.iterative_scan, see settings), and exactly when that comes up short.
    The similarity floor is applied after the nearest-neighbour query, not in its WHERE clause, so the
    index scan stops after ``limit`` rows instead of searching the graph for rows that pass the floor.
    """
    distance = CosineDistance("embedding", embedding)
    small = candidates.order_by().values("pk")[:EXACT_SCAN_BELOW].count() < EXACT_SCAN_BELOW
    rows = [] if small else _nearest(candidates.annotate(distance=distance), limit)
    if small or len(rows) < limit:
        if not small:
            logger.info("nearest memories: the index scan returned %d of %d rows; ranking exactly", len(rows), limit)
        # "+ 0" makes an expression no index can serve, so PostgreSQL ranks the filtered rows exactly.
        exact = ExpressionWrapper(distance + Value(0.0), output_field=FloatField())
        rows = _nearest(candidates.annotate(distance=exact), limit)
    rows.sort(key=lambda row: (row[1], row[0]))  # relaxed_order scans may return rows slightly out of order
    return [(pk, 1 - d) for pk, d in rows if 1 - d >= min_similarity]


def _nearest(queryset, limit: int) -> list[tuple[int, float]]:
    return [tuple(row) for row in queryset.order_by("distance").values_list("pk", "distance")[:limit]]
