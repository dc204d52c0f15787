"""The one merge fold: what a memory that stays takes over from the duplicates merged into it.

Used by the store path (a new draft merges into a duplicate), by edits (a duplicate merges into
the edited memory) and by consolidation (near-identical memories merge into the best one). Which
memory stays, and whose text it keeps, is each caller's decision; the fold is the rest.
"""

from collections.abc import Sequence

from memories.models import PROVENANCE_RANK, Memory


def memories_fold(*, kept: Memory, others: Sequence[Memory]) -> None:
    """Fold ``others`` into ``kept``, in memory (the caller saves, deletes and moves access counts).

    - provenance: the highest; occurrences: the sum; confidence and importance: the maximum;
    - valid_at and created_at: the earliest (a missing date, None, takes no part);
    - subject and predicate move together, as a pair: ``kept`` keeps its pair when it has both,
      else takes the first complete pair of the others; never one from each memory, which would
      invent a pair neither had (and supersede would act on it);
    - about: ``kept``'s, else the first other's.
    """
    for other in others:
        if PROVENANCE_RANK[other.provenance] > PROVENANCE_RANK[kept.provenance]:
            kept.provenance = other.provenance
        kept.occurrences += other.occurrences
        kept.confidence = max(kept.confidence, other.confidence)
        kept.importance = max(kept.importance, other.importance)
        kept.valid_at = _earliest(kept.valid_at, other.valid_at)
        kept.created_at = _earliest(kept.created_at, other.created_at)
        if not (kept.subject and kept.predicate) and other.subject and other.predicate:
            kept.subject, kept.predicate = other.subject, other.predicate
        if kept.about_id is None and other.about_id is not None:
            kept.about_id = other.about_id


def _earliest(a, b):
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)
