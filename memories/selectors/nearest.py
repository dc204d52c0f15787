"""Nearest memories by vector, correct under any filter: HNSW iterative scans, or an exact scan for small sets."""

import logging
from collections.abc import Sequence

from django.core.exceptions import EmptyResultSet, FullResultSet
from django.db import connection
from django.db.models import FloatField, Value
from django.db.models.expressions import ExpressionWrapper
from pgvector.django import CosineDistance

from memories.embedders import vector_array_literal

logger = logging.getLogger(__name__)

# Below this many rows in the filtered set, rank them exactly instead of walking the HNSW graph: the
# graph walk would visit (up to hnsw.max_scan_tuples) mostly filtered-out rows before giving up. Kept
# low because finding out is paid on every call; above it the iterative scan finds ``limit`` rows
# within hnsw.max_scan_tuples (20,000) as long as 1 row in 1,000 passes the filter (at 100k memories).
EXACT_SCAN_BELOW = 100
# The probe looks at the ids from the table's first up to this many beyond it (at most that many rows)
# before it asks the filter's own index.
PROBE_WINDOW = 10 * EXACT_SCAN_BELOW

# Both plans in one statement, for every query vector of one filter. ``few`` holds up to
# EXACT_SCAN_BELOW ids that pass the filter (one pass, shared by both branches and all vectors); if it
# is full the set is large and the first branch walks the HNSW index, else the second ranks those few
# rows exactly ("+ 0": an expression no index can serve), read by their ids (a join could be planned
# as a walk over the whole table). PostgreSQL evaluates each gate once and skips the other branch.
# Each vector is one row of ``q``; the LATERAL join runs the branches once per vector, with the
# vector as the index scan's ordering key, and keeps a vector with no rows (one row, id NULL) so that
# ``exact`` says an empty small set was searched completely. Raw SQL because the ORM cannot share one
# materialised subquery between the two branches, nor join a subquery laterally.
# The probe is bounded whatever the planner estimates. It first walks the primary key ("id > 0":
# every id is) over at most PROBE_WINDOW rows (the first rows of the table, which stay in
# shared_buffers): a large set fills ``few`` there. Only when it does not, the filter's own index
# is asked ("first" is then ignored). A walk left to the planner went through the whole table when
# its statistics counted rows that were gone (a newcomer's 13 visible rows after a large delete:
# 80-250 ms at 100k memories). There is no ORDER BY: with sorts off it could only walk the primary
# key. Sequential scans stay off: one of a table larger than a quarter of shared_buffers goes
# through a small ring of buffers, so it read the same ~80 pages from the OS cache on every call.
FORCE_INDEX_SQL = "SET enable_seqscan = off; SET enable_sort = off"
RESET_PLANNER_SQL = "RESET enable_seqscan; RESET enable_sort"
FEW_SQL = """first{g} AS MATERIALIZED (
 SELECT id FROM memories_memory WHERE ({where}) AND id > 0
 AND id < (SELECT min(id) FROM memories_memory) + %(window)s
 LIMIT %(few)s),
few{g} AS MATERIALIZED (
 (SELECT id FROM first{g} WHERE (SELECT count(*) FROM first{g}) >= %(few)s)
 UNION ALL
 (SELECT id FROM memories_memory WHERE ({where}) AND (SELECT count(*) FROM first{g}) < %(few)s LIMIT %(few)s))"""
BRANCH_SQL = """
SELECT q.i, n.id, n.distance, (SELECT count(*) FROM few{g}) < %(few)s AS exact
FROM unnest(%(v{g})s::vector[], %(i{g})s::int[]) AS q(v, i) LEFT JOIN LATERAL (
 (SELECT id, embedding <=> q.v AS distance FROM memories_memory
  WHERE ({where}) IS TRUE AND (SELECT count(*) FROM few{g}) >= %(few)s ORDER BY distance LIMIT %(limit)s)
 UNION ALL
 (SELECT m.id, (m.embedding <=> q.v) + 0 AS distance
  FROM memories_memory m WHERE m.id = ANY(ARRAY(SELECT id FROM few{g}))
  AND (SELECT count(*) FROM few{g}) < %(few)s ORDER BY distance LIMIT %(limit)s)
) n ON true"""


def nearest_memories(*, candidates, embedding, limit: int, min_similarity: float = -1.0) -> list[tuple[int, float]]:
    """(id, similarity) of the ``limit`` candidates nearest to ``embedding`` with similarity >= ``min_similarity``.

    ``candidates`` is a Memory queryset filtered on its own columns (a visibility filter, one
    owner's scope). It returns as many rows as exist, up to ``limit``: small sets are ranked exactly;
    large ones by the HNSW index with pgvector's iterative scan (hnsw.iterative_scan, see settings),
    and exactly when that comes up short. The similarity floor is applied afterwards, not in the
    WHERE clause, so the index scan stops after ``limit`` rows instead of searching the graph for
    rows that pass the floor.
    """
    return nearest_memories_many(searches=[(candidates, embedding)], limit=limit, min_similarity=min_similarity)[0]


def nearest_memories_many(
    *, searches: Sequence[tuple[object, object]], limit: int, min_similarity: float = -1.0
) -> list[list[tuple[int, float]]]:
    """``nearest_memories`` for each (candidates, embedding) pair, in one statement; one result list per pair.

    Pairs with the same filter share its ``few`` probe, so a batch of items of one scope costs one
    pass over that scope plus one index (or exact) search per vector.
    """
    wheres = [table_where(candidates) for candidates, _ in searches]  # compiled once per queryset object
    groups: dict[object, tuple[str, tuple, list[int]]] = {}
    for index, where in enumerate(wheres):
        if where is None:  # nothing can pass the filter
            continue
        key = where
        try:
            hash(key)
        except TypeError:  # unhashable parameters: a group of its own
            key = index
        groups.setdefault(key, (*where, []))[2].append(index)
    rows: list[list[tuple[int, float]]] = [[] for _ in searches]
    exact = [False] * len(searches)  # ranked exactly (a small set): then ``rows`` holds all there is
    if groups:
        ctes, branches = [], []
        params: dict = {"few": EXACT_SCAN_BELOW, "window": PROBE_WINDOW, "limit": limit}
        for g, (where, where_params, indexes) in enumerate(groups.values()):
            names = {f"g{g}w{k}": value for k, value in enumerate(where_params)}
            # The WHERE clause comes with %s placeholders; the statement uses named ones.
            named = where.replace("%%", "%%%%") % tuple(f"%({name})s" for name in names)
            ctes.append(FEW_SQL.format(g=g, where=named))
            branches.append(BRANCH_SQL.format(g=g, where=named))
            params.update(names)
            params[f"v{g}"] = vector_array_literal([searches[i][1] for i in indexes])
            params[f"i{g}"] = indexes
        sql = f"WITH {', '.join(ctes)}\n" + "\nUNION ALL\n".join(branches)
        with connection.cursor() as cursor:
            # The choice between the branches is the real size of the set (``few``), not the planner's
            # estimate: kept from ranking a large set exactly (a sort of every row, when it estimated
            # the set small), the first branch can only walk the HNSW index. Session settings around
            # the statement, in the same round trip: a multi-statement string runs as one transaction
            # outside a transaction block, so a failure reverts the settings too.
            cursor.execute(f"{FORCE_INDEX_SQL}; {sql}; {RESET_PLANNER_SQL}", params)
            while cursor.description is None or len(cursor.description) != 4:
                cursor.nextset()
            found_rows = cursor.fetchall()
            for index, pk, distance, was_exact in found_rows:
                exact[index] = was_exact
                if pk is not None:
                    rows[index].append((pk, float(distance)))
    results = []
    for (candidates, embedding), where, found, was_exact in zip(searches, wheres, rows, exact, strict=True):
        if where is not None and not was_exact and len(found) < limit:
            logger.info("nearest memories: the index scan returned %d of %d rows; ranking exactly", len(found), limit)
            distance = ExpressionWrapper(CosineDistance("embedding", embedding) + Value(0.0), output_field=FloatField())
            found = list(
                candidates.annotate(distance=distance).order_by("distance").values_list("pk", "distance")[:limit]
            )
        found.sort(key=lambda row: (row[1], row[0]))  # relaxed_order scans may return rows slightly out of order
        results.append([(pk, 1 - d) for pk, d in found if 1 - d >= min_similarity])
    return results


def table_where(candidates) -> tuple[str, tuple] | None:
    """The WHERE clause (SQL with %s placeholders, its params as a tuple) of a Memory queryset that filters on the
    table's own columns, for raw SQL on memories_memory; None when nothing can match.

    Compiled once per queryset object and kept on it: recall's four statements on the table share one
    candidates queryset. A queryset's methods return a new object, so a further filter compiles its own.
    """
    try:
        return candidates._table_where
    except AttributeError:
        pass
    query = candidates.query
    if sum(1 for count in query.alias_refcount.values() if count) > 1:  # joins the filter did not trim
        raise ValueError("nearest_memories needs a filter on the memories table's own columns (no joins).")
    compiler = query.get_compiler(using=candidates.db)
    try:
        where, params = compiler.compile(query.where)
    except EmptyResultSet:
        where = None
    except FullResultSet:
        where = ("TRUE", ())
    else:
        where = (where or "TRUE", tuple(params))
    candidates._table_where = where
    return where
