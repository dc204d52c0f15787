"""The admin's memory search: by meaning (vectors), by words (BM25) and by dates, fused as recall fuses them; reads only."""

from django.db.models import QuerySet

from memories.models import Memory
from memories.selectors.recall import ranked_memories, weights_for
from memories.services.embeddings import active_embedder

SEARCH_LIMIT = 50


def memories_search(*, query: str, queryset: QuerySet | None = None, limit: int = SEARCH_LIMIT) -> list[int]:
    """Ids of the memories in ``queryset`` that match ``query`` by meaning or by words, best first.

    The same paths and fusion as recall (``ranked_memories``), with the words stemmed in every
    language the queryset holds. No visibility filter (the caller's queryset decides) and no side
    effects: unlike recall it bumps no access counts.
    """
    query = (query or "").strip()
    if not query:
        return []
    queryset = Memory.objects.all() if queryset is None else queryset
    embedder = active_embedder()
    # The admin's queryset may carry joins (list filters); the search paths need the table's own
    # columns, so they get the same rows as an id subquery.
    candidates = Memory.objects.filter(pk__in=queryset.order_by().values("pk"))
    languages = sorted(set(queryset.order_by().values_list("language", flat=True).distinct()))
    ranked = ranked_memories(
        candidates=candidates,
        query=query,
        embedding=embedder.embed_query(query),
        languages=languages or ["simple"],
        limit=limit,
        thresholds=embedder.thresholds,
        weights=weights_for(embedder.name),
    )
    return [hit.id for hit in ranked]
