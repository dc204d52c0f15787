"""The one merge fold: what a memory that stays takes over from the duplicates merged into it, and
the one way to merge stored duplicates away.

``memories_fold`` is used by the store path (a new draft merges into a duplicate), by edits (a
duplicate merges into the edited memory) and by consolidation (near-identical memories merge into
the best one). ``memories_merge_away`` is the rest for stored duplicates (edits, consolidation):
their access counts, what they superseded, their rows. Which memory stays, and whose text it keeps,
is each caller's decision.
"""

from collections.abc import Sequence

from django.db import connection

from memories.models import PROVENANCE_RANK, Memory
from memories.services.access import access_of, add_accesses

# Memories that a merged-away memory had superseded now point at the one that stays.
REPOINT_SQL = """
UPDATE memories_memory m SET superseded_by_id = v.winner
FROM unnest(%s::bigint[], %s::bigint[]) AS v(loser, winner)
WHERE m.superseded_by_id = v.loser
RETURNING m.id, v.winner
"""


def memories_merge_away(*, groups: Sequence[tuple[Memory, Sequence[Memory]]]) -> list[tuple[int, int]]:
    """Merge each group's stored ``others`` into its ``kept`` memory and delete them.

    ``kept`` takes over their fields (``memories_fold``, in memory: the caller saves it) and their
    access counts (added to its access row); what they had superseded is pointed at ``kept``; they are
    deleted (a merge, not a forget: no tombstone). Returns (memory id, kept id) of every memory whose
    ``superseded_by`` was pointed at the memory that stays.
    """
    accesses = {}
    losers, winners = [], []
    for kept, others in groups:
        memories_fold(kept=kept, others=others)
        accesses[kept.pk] = access_of(others)
        losers += [other.pk for other in others]
        winners += [kept.pk] * len(others)
    if not losers:
        return []
    with connection.cursor() as cursor:
        cursor.execute(REPOINT_SQL, [losers, winners])
        repointed = cursor.fetchall()
    # The ORM delete, so that relations other apps add to Memory are honoured.
    Memory.objects.filter(pk__in=losers).only("pk").delete()
    add_accesses(accesses)
    return repointed


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
