"""Nearest memories by vector, correct under any filter: HNSW iterative scans, or an exact scan for small sets."""

import logging

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection
from django.db.models import FloatField, Value
from django.db.models.expressions import ExpressionWrapper
from pgvector.django import CosineDistance

from memories.embedders import vector_literal

logger = logging.getLogger(__name__)

# Below this many rows in the filtered set, rank them exactly instead of walking the HNSW graph: the
# graph walk would visit (up to hnsw.max_scan_tuples) mostly filtered-out rows before giving up. Kept
# low because finding out is paid on every call; above it the iterative scan finds ``limit`` rows
# within hnsw.max_scan_tuples (20,000) as long as 1 row in 1,000 passes the filter (at 100k memories).
EXACT_SCAN_BELOW = 100

# Both plans in one statement. ``few`` holds up to EXACT_SCAN_BELOW ids that pass the filter (one
# pass, shared by both branches); if it is full the set is large and the first branch walks the HNSW
# index, else the second ranks those few rows exactly ("+ 0": an expression no index can serve).
# PostgreSQL evaluates each branch's gate once and skips the other branch. Raw SQL because the ORM
# cannot share one materialised subquery between the two branches.
NEAREST_SQL = """
WITH few AS MATERIALIZED (SELECT id FROM memories_memory WHERE {where} LIMIT %(few)s)
(SELECT id, embedding <=> %(vector)s::vector AS distance, false AS exact FROM memories_memory
 WHERE {where} AND (SELECT count(*) FROM few) >= %(few)s ORDER BY distance LIMIT %(limit)s)
UNION ALL
(SELECT m.id, (m.embedding <=> %(vector)s::vector) + 0 AS distance, true AS exact
 FROM memories_memory m JOIN few ON few.id = m.id
 WHERE (SELECT count(*) FROM few) < %(few)s ORDER BY distance LIMIT %(limit)s)
"""


def nearest_memories(*, candidates, embedding, limit: int, min_similarity: float = -1.0) -> list[tuple[int, float]]:
    """(id, similarity) of the ``limit`` candidates nearest to ``embedding`` with similarity >= ``min_similarity``.

    ``candidates`` is a Memory queryset filtered on its own columns (a visibility filter, one
    owner's scope). It returns as many rows as exist, up to ``limit``: small sets are ranked exactly;
    large ones by the HNSW index with pgvector's iterative scan (hnsw.iterative_scan, see settings),
    and exactly when that comes up short. The similarity floor is applied afterwards, not in the
    WHERE clause, so the index scan stops after ``limit`` rows instead of searching the graph for
    rows that pass the floor.
    """
    rows = _both_plans(candidates=candidates, embedding=embedding, limit=limit)
    if len(rows) < limit and not any(was_exact for _, _, was_exact in rows):
        logger.info("nearest memories: the index scan returned %d of %d rows; ranking exactly", len(rows), limit)
        exact = ExpressionWrapper(CosineDistance("embedding", embedding) + Value(0.0), output_field=FloatField())
        ranked = candidates.annotate(distance=exact).order_by("distance").values_list("pk", "distance")[:limit]
        rows = [(pk, distance, True) for pk, distance in ranked]
    rows.sort(key=lambda row: (row[1], row[0]))  # relaxed_order scans may return rows slightly out of order
    return [(pk, 1 - d) for pk, d, _ in rows if 1 - d >= min_similarity]


def table_where(queryset) -> tuple[str, list] | None:
    """The WHERE clause (SQL with %s placeholders, params) of a Memory queryset that filters on the table's own
    columns, for raw SQL on memories_memory; None when nothing can match."""
    query = queryset.query
    if sum(1 for count in query.alias_refcount.values() if count) > 1:  # joins the filter did not trim
        raise ValueError("Only a filter on the memories table's own columns fits here (no joins).")
    compiler = query.get_compiler(using=queryset.db)
    try:
        where, params = compiler.compile(query.where)
    except EmptyResultSet:
        return None
    except FullResultSet:
        return "TRUE", []
    return where or "TRUE", list(params)


def _both_plans(*, candidates, embedding, limit: int) -> list[tuple[int, float, bool]]:
    found = table_where(candidates)
    if found is None:
        return []
    where, params = found
    # The WHERE clause comes with %s placeholders; the statement uses named ones.
    names = {f"w{i}": value for i, value in enumerate(params)}
    where = where.replace("%%", "%%%%") % tuple(f"%({name})s" for name in names)
    sql = NEAREST_SQL.format(where=where)
    with connection.cursor() as cursor:
        cursor.execute(sql, {**names, "few": EXACT_SCAN_BELOW, "vector": vector_literal(embedding), "limit": limit})
        return [(pk, float(distance), exact) for pk, distance, exact in cursor.fetchall()]
