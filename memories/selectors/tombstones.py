"""Forget blocks: which tombstones a text comes close to."""

from django.db import connection

from memories.embedders import Embedder, embedder_by_name, vector_literal
from memories.models import Tombstone


def tombstone_hits(*, content: str, embedding, embedder: Embedder, tombstones=None) -> list[int]:
    """Ids of tombstones within their embedder's ``tombstone`` threshold of ``content``.

    ``tombstones`` narrows the set (e.g. ``Tombstone.objects.visible_to(...)``); default all. Each
    tombstone is compared in the space of the embedder that made it: the content is embedded with
    that embedder when it is not the current one.
    """
    queryset = (Tombstone.objects.all() if tombstones is None else tombstones).order_by()
    hits: list[int] = []
    for name in queryset.values_list("embedder", flat=True).distinct():
        space = embedder if name == embedder.name else embedder_by_name(name)
        vector = embedding if name == embedder.name else space.embed_query(content)
        candidates_sql, candidates_params = (
            queryset.filter(embedder=name).values("id", "embedding").query.sql_with_params()
        )
        # The subquery fence (OFFSET 0) keeps PostgreSQL from comparing vectors of other dimensions.
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id FROM ({candidates_sql} OFFSET 0) t WHERE 1 - (t.embedding <=> %s::vector) >= %s",
                [*candidates_params, vector_literal(vector), space.thresholds.tombstone],
            )
            hits.extend(row[0] for row in cursor.fetchall())
    return hits
