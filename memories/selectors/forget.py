"""Which memories a "forget …" request means: vector and keyword matches among what the speaker may see."""

import re

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F

from memories.embedders import Embedder
from memories.embedding_space import active_embedder
from memories.languages import MAIN_LANGUAGES, text_search_config
from memories.models import Memory
from memories.selectors.duplicates import duplicate_scope_memories, is_duplicate
from memories.selectors.fusion import Ranking, fuse
from memories.selectors.nearest import nearest_memories
from memories.selectors.ranking import RecallTuning, relevance_floor, similarity_at

FORGET_CANDIDATES_MAX = 5
MAX_KEYWORDS = 12
# The household's main languages: a word that is a stop word in any of them says nothing about what to forget.
KEYWORD_LANGUAGES = MAIN_LANGUAGES
# Words that ask to forget rather than say what; they would match any memory that happens to contain them.
REQUEST_WORDS = frozenset(
    """
    forget forgets forgotten please delete erase remove memory memories
    vergiss vergesst vergessen bitte lösch lösche löschen entferne entfernen erinnerung
    dimentica dimenticare dimenticati favore cancella cancellare ricordo
    olvida olvidar olvídate favor borra borrar recuerdo
    oublie oublier oubliez plaît efface effacer supprime supprimer souvenir
    """.split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def _what_to_forget(query: str) -> str:
    """The request without its request words, what the vector path embeds: "Vergiss den Ersatzschlüssel" ->
    "den Ersatzschlüssel" (e5-small puts the key further above the household's other facts without "Vergiss")."""
    return " ".join(w for w in _WORD.findall(query) if w.lower() not in REQUEST_WORDS)


def _keyword_queries(query: str) -> list[str]:
    """Per word that says what to forget, a tsquery (as text) matching it as typed or as any main language stems it.

    Request words and stop words of the main languages are dropped (PostgreSQL's own stop word lists:
    a stop word yields an empty tsvector). One round trip; the stems meet each memory's own stemming.
    """
    words = [
        w for w in dict.fromkeys(_WORD.findall(query.lower())) if w not in REQUEST_WORDS and (len(w) > 1 or w.isdigit())
    ][:MAX_KEYWORDS]
    if not words:
        return []
    stop_configs = [text_search_config(code) for code in KEYWORD_LANGUAGES]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT string_agg(DISTINCT q.lexemes, ' | ') FROM unnest(%s::regconfig[]) AS c(cfg), "
            "LATERAL CAST(plainto_tsquery(c.cfg, u.w) AS text) AS q(lexemes) WHERE q.lexemes <> '') "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS u(w, i) "
            "WHERE NOT EXISTS (SELECT 1 FROM unnest(%s::regconfig[]) AS s(cfg) WHERE length(to_tsvector(s.cfg, u.w)) = 0) "
            "ORDER BY u.i",
            [["simple", *dict.fromkeys(stop_configs)], words, stop_configs],
        )
        return [row[0] for row in cursor.fetchall() if row[0]]


def _keyword_ids(*, base, word_queries: list[str], limit: int) -> list[tuple[int, float]]:
    """(id, rank) of the memories holding every keyword; when none does, of those holding any (best first)."""
    combinations = [" & ".join(f"({q})" for q in word_queries)]
    if len(word_queries) > 1:
        combinations.append(" | ".join(f"({q})" for q in word_queries))
    for text in combinations:
        # The lexemes are normalised already; 'simple' parses them back without changing them.
        combined = SearchQuery(text, config="simple", search_type="raw")
        ids = list(
            base.filter(search_vector=combined)
            .annotate(rank=SearchRank(F("search_vector"), combined))
            .order_by("-rank", "-created_at")
            .values_list("pk", "rank")[:limit]
        )
        if ids:
            return ids
    return []


def _vector_ids(*, base, query: str, embedder: Embedder, limit: int) -> list[tuple[int, float]]:
    """Memories from the embedder's ``forget_minimum`` on and within its ``forget_margin`` of the best, nearest first.

    A hit far below the best one is noise, not what the speaker meant ("forget the gate code" should not offer every
    memory that shares a few words); below the minimum, the request names nothing stored ("forget my tax return").
    """
    tuning, thresholds = RecallTuning.for_embedder(embedder.name), embedder.thresholds
    rows = nearest_memories(
        candidates=base,
        embedding=embedder.embed_query(_what_to_forget(query)),
        limit=limit,
        min_similarity=similarity_at(tuning.forget_minimum, thresholds),
    )
    if not rows:
        return []
    floor = relevance_floor(rows[0][1], thresholds, margin=tuning.forget_margin)
    return [(pk, similarity) for pk, similarity in rows if similarity >= floor]


def forget_matches(*, query: str, speaker, room, limit: int = FORGET_CANDIDATES_MAX) -> list[Memory]:
    """The memories visible to ``speaker`` in ``room`` that a forget request most likely means, best first.

    Superseded memories are included: an older version of a fact holds the same content. A request
    of only request and stop words ("please forget that") names nothing and finds nothing.
    """
    word_queries = _keyword_queries(query)
    if not word_queries:
        return []  # "forget that" names nothing: the assistant must say what
    base = Memory.objects.visible_to(speaker=speaker, room=room)
    vector_ids = _vector_ids(base=base, query=query, embedder=active_embedder(), limit=limit)
    keyword_ids = _keyword_ids(base=base, word_queries=word_queries, limit=limit)
    # Both paths' scores relative to their best hit, equal weights: a tie (each path's first) goes
    # to the surer path, then to the better rank (fuse).
    rankings = {
        "vector": Ranking(hits=vector_ids, relative=True),
        "keyword": Ranking(hits=[(pk, float(rank)) for pk, rank in keyword_ids], relative=True),
    }
    best = [hit.id for hit in fuse(rankings, limit=limit)]
    memories = Memory.objects.defer("embedding", "search_vector").in_bulk(best)
    return [memories[pk] for pk in best if pk in memories]


DUPLICATES_PAGE = 100


def forget_with_duplicates(*, memory_ids: list[int], visible) -> list[int]:
    """``memory_ids`` and every active duplicate of each among ``visible`` (what the speaker may see), sorted.

    A duplicate is what the store path would have merged: the same scope, owner and room, similarity
    at the embedder's ``duplicate`` threshold, the same numbers and dates. However many there are
    (copies left by a race or a retried request): the search widens until it comes back short.
    """
    threshold = active_embedder().thresholds.duplicate
    found = set(memory_ids)
    originals = Memory.objects.filter(pk__in=memory_ids).only(
        "pk", "content", "embedding", "scope", "owner_id", "room_id"
    )
    for memory in originals:
        candidates = duplicate_scope_memories(memory)
        limit = DUPLICATES_PAGE
        while True:
            near = nearest_memories(
                candidates=candidates, embedding=memory.embedding, limit=limit, min_similarity=threshold
            )
            if len(near) < limit:
                break
            limit *= 4
        similarities = {pk: similarity for pk, similarity in near if pk not in found}
        for row in visible.filter(pk__in=similarities).only("pk", "content", "scope", "owner_id", "room_id"):
            if is_duplicate(row, memory, similarity=similarities[row.pk], threshold=threshold):
                found.add(row.pk)
    return sorted(found)
