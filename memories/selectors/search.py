"""The admin's memory search: by meaning (vectors) and by words (full text), fused; reads only."""

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F, QuerySet

from memories.languages import text_search_config
from memories.models import Memory
from memories.selectors.nearest import nearest_memories
from memories.services.embeddings import active_embedder

SEARCH_LIMIT = 50  # per path; the fused list holds at most twice as many
RRF_K = 60  # reciprocal rank fusion constant (Cormack et al.)


def keyword_query(*, query: str, languages) -> SearchQuery:
    """The query as PostgreSQL full text: as typed ('simple': names, numbers) or stemmed in each stored language."""
    combined = SearchQuery(query, config="simple", search_type="websearch")
    for config in sorted({text_search_config(code) for code in languages} - {"simple"}):
        combined |= SearchQuery(query, config=config, search_type="websearch")
    return combined


def memories_search(*, query: str, queryset: QuerySet | None = None, limit: int = SEARCH_LIMIT) -> list[int]:
    """Ids of the memories in ``queryset`` that match ``query`` by meaning or by words, best first.

    The vector path keeps what is at least the embedder's ``recall_min`` similar; the keyword path
    what PostgreSQL's full text matches. Reciprocal rank fusion orders the union, so neither path
    loses what it alone found. No visibility filter (the caller's queryset decides) and no side
    effects: unlike recall it bumps no access counts.
    """
    query = (query or "").strip()
    if not query:
        return []
    queryset = Memory.objects.all() if queryset is None else queryset
    embedder = active_embedder()
    vector = embedder.embed_query(query)
    # The admin's queryset may carry joins (list filters); nearest_memories needs the table's own
    # columns, so it gets the same rows as an id subquery. It also keeps the threshold out of the
    # HNSW scan (a threshold inside the scan walks the graph when few rows pass it).
    by_meaning = [
        pk
        for pk, _ in nearest_memories(
            candidates=Memory.objects.filter(pk__in=queryset.order_by().values("pk")),
            embedding=vector,
            limit=limit,
            min_similarity=embedder.thresholds.recall_min,
        )
    ]
    languages = queryset.order_by().values_list("language", flat=True).distinct()
    words = keyword_query(query=query, languages=list(languages))
    by_words = list(
        queryset.filter(search_vector=words)
        .alias(rank=SearchRank(F("search_vector"), words))
        .order_by("-rank", "pk")
        .values_list("pk", flat=True)[:limit]
    )
    scores: dict[int, float] = {}
    for ranking in (by_meaning, by_words):
        for position, pk in enumerate(ranking):
            scores[pk] = scores.get(pk, 0.0) + 1.0 / (RRF_K + position + 1)
    return sorted(scores, key=lambda pk: (-scores[pk], pk))
