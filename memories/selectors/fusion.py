"""One fusion of ranked lists for every search that has more than one path (recall, admin search, forget candidates).

A memory's fused score is the sum, over the rankings that hold it, of the ranking's weight times
the memory's score in it (divided by the ranking's best score where scores are comparable only
within one question, such as BM25). Scores rather than bare ranks: a path that is sure (a rare
word, a close vector) counts for more than one that barely found anything, and a memory in the
middle of both lists no longer outscores either path's clear first place (reciprocal rank fusion
did that: 1/63 + 1/64 > 1/61). See docs/recall.md for the figures behind the weights.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ranking:
    """One path's hits, best first: (memory id, score)."""

    hits: Sequence[tuple[int, float]]
    weight: float = 1.0
    relative: bool = False  # scores are divided by the best hit's (comparable within one query only)
    keep: int = 0  # the first ``keep`` hits are never cut: what the path alone puts on top stays
    supplement: bool = False  # its hits only fill places left after the others, in its own order, without voting
    # What each hit votes with, in ``hits`` order, when that is not its score (the vector path: its similarity
    # placed on the embedder's scale); ``found_by`` still shows the score.
    votes: Sequence[float] | None = None


@dataclass(frozen=True)
class Found:
    """Where one path put a memory: its rank there (1 = first) and its score in that path."""

    rank: int
    score: float


@dataclass(frozen=True)
class Fused:
    id: int
    score: float
    found_by: dict[str, Found] = field(default_factory=dict)


def _contributions(ranking: Ranking):
    """(rank, id, score, weight x vote) of each hit of a voting ranking; the vote is the score (relative to the
    best one when ``relative``) or the ranking's ``votes``."""
    votes = ranking.votes if ranking.votes is not None else [value for _, value in ranking.hits]
    top = max(votes, default=0.0) if ranking.relative else 1.0
    for rank, ((pk, value), vote) in enumerate(zip(ranking.hits, votes, strict=True), start=1):
        yield rank, pk, value, ranking.weight * (vote / top if top > 0 else 0.0)


def fused_scores(rankings: Mapping[str, Ranking]) -> dict[int, float]:
    """Every memory's fused score (the sum of its weighted scores over the voting rankings), uncut."""
    score: dict[int, float] = {}
    for ranking in rankings.values():
        if not ranking.supplement:
            for _, pk, _, contribution in _contributions(ranking):
                score[pk] = score.get(pk, 0.0) + contribution
    return score


def fuse(rankings: Mapping[str, Ranking], *, limit: int) -> list[Fused]:
    """The memories of all rankings, best fused score first, cut to ``limit``.

    Ties go to the memory whose best single path is surer (the larger weighted score), then to the
    better rank in it, then to the lower id. Supplementing rankings add their hits, in their order,
    to places the others left free (and their rank and score to ``found_by``).
    """
    score = fused_scores(rankings)
    best: dict[int, tuple[float, int]] = {}  # id -> (largest single contribution, its rank)
    found_by: dict[int, dict[str, Found]] = {}
    for name, ranking in rankings.items():
        for rank, pk, value, contribution in _contributions(ranking):
            found_by.setdefault(pk, {}).setdefault(name, Found(rank=rank, score=value))
            if ranking.supplement:
                continue
            if pk not in best or (-contribution, rank) < (-best[pk][0], best[pk][1]):
                best[pk] = (contribution, rank)
    order = sorted(score, key=lambda pk: (-score[pk], -best[pk][0], best[pk][1], pk))
    kept: list[int] = []
    for ranking in rankings.values():
        if not ranking.supplement:
            kept += [pk for pk, _ in ranking.hits[: ranking.keep] if pk not in kept]
    kept += [pk for pk in order if pk not in kept][: max(limit - len(kept), 0)]
    chosen = set(kept[:limit]) if len(kept) > limit else set(kept)
    result = [pk for pk in order if pk in chosen]
    for ranking in rankings.values():
        if ranking.supplement:
            result += [pk for pk, _ in ranking.hits if pk not in chosen and pk not in result][: limit - len(result)]
    return [Fused(id=pk, score=round(score.get(pk, 0.0), 4), found_by=found_by[pk]) for pk in result]
