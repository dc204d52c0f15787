"""Forget blocks: which tombstones a text comes close to."""

from django.db import connection
from django.db.models.functions import Cast
from pgvector.django import VectorField

from memories.embedders import Embedder, embedder_by_name, vector_array_literal
from memories.models import Tombstone

# Every text against every tombstone of one embedder, in one statement. The subquery fence
# (OFFSET 0) keeps PostgreSQL from comparing vectors of other dimensions. Tombstone vectors are kept
# inline (migration 0003); should one be out of line (TOAST) or compressed all the same, the typmod
# cast (``::vector(dim)``) fetches it once per statement instead of once per comparison.
HITS_SQL = """
SELECT q.i, t.id, NULL::text FROM ({candidates} OFFSET 0) t
JOIN unnest(%s::vector[], %s::int[]) AS q(v, i) ON 1 - (t.vector <=> q.v) >= %s
"""
# Appended to the statement for the current embedder: which other embedders made tombstones (rare:
# only after a switch of embedder), saving the round trip that would ask first.
OTHERS_SQL = "UNION ALL SELECT NULL, NULL, o.embedder FROM ({others}) o"


def tombstone_hits(*, content: str, embedding, embedder: Embedder, tombstones=None) -> list[int]:
    """Ids of tombstones within their embedder's ``tombstone`` threshold of ``content``.

    ``tombstones`` narrows the set (e.g. ``Tombstone.objects.visible_to(...)``); default all. Each
    tombstone is compared in the space of the embedder that made it: the content is embedded with
    that embedder when it is not the current one.
    """
    return tombstone_hits_many(contents=[content], embeddings=[embedding], embedder=embedder, tombstones=tombstones)[0]


def tombstone_hits_many(*, contents: list[str], embeddings, embedder: Embedder, tombstones=None) -> list[list[int]]:
    """``tombstone_hits`` for many texts: one statement per embedder the tombstones were made with."""
    queryset = (Tombstone.objects.all() if tombstones is None else tombstones).order_by()
    hits: list[list[int]] = [[] for _ in contents]
    if not contents:
        return hits
    others = _hits(queryset=queryset, space=embedder, vectors=embeddings, hits=hits, with_others=True)
    for name in sorted(others):
        space = embedder_by_name(name)
        _hits(queryset=queryset, space=space, vectors=space.embed_documents(list(contents)), hits=hits)
    for found in hits:
        found.sort()
    return hits


def _hits(*, queryset, space: Embedder, vectors, hits: list[list[int]], with_others: bool = False) -> set[str]:
    """Add the hits among ``space``'s tombstones to ``hits``; with ``with_others``, return the other embedders' names."""
    candidates = queryset.filter(embedder=space.name).annotate(
        vector=Cast("embedding", VectorField(dimensions=len(vectors[0])))
    )
    sql, params = candidates.values("id", "vector").query.sql_with_params()
    sql = HITS_SQL.format(candidates=sql)
    params = [*params, vector_array_literal(vectors), list(range(len(vectors))), space.thresholds.tombstone]
    if with_others:
        others_sql, others_params = (
            queryset.exclude(embedder=space.name).values("embedder").distinct().query.sql_with_params()
        )
        sql += OTHERS_SQL.format(others=others_sql)
        params += others_params
    others: set[str] = set()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for index, pk, other in cursor.fetchall():
            if other is not None:
                others.add(other)
            else:
                hits[index].append(pk)
    return others
