"""The duplicate rule, in one place: when two memories are the same memory.

Two memories are duplicates when they are in the same duplicate scope (scope, owner, room:
memories.scopes), their vectors are at least the embedder's ``duplicate`` threshold alike, and they
carry the same numbers and dates (memories.matching). The store merges a new memory into its
duplicate, an edit takes a duplicate of its new text in, forgetting a memory forgets its duplicates,
and consolidation folds them: each asks here.
"""

from collections.abc import Iterable
from itertools import islice

from pgvector.django import CosineDistance

from memories.matching import may_be_duplicates
from memories.models import Memory
from memories.scopes import duplicate_scope_of, duplicate_scope_q
from memories.selectors.nearest import nearest_memories

# How many of the nearest candidates in the scope a new or edited memory is compared with (by their
# numbers and dates): the store's vector search asks for this many.
DUPLICATE_CANDIDATES = 5


def is_duplicate(a, b, *, similarity: float, threshold: float) -> bool:
    """Whether ``a`` and ``b`` (memories or drafts), ``similarity`` apart, are the same memory."""
    return (
        similarity >= threshold
        and duplicate_scope_of(a) == duplicate_scope_of(b)
        and may_be_duplicates(a.content, b.content)
    )


def nearest_duplicate(item, candidates: Iterable[tuple[float, object]], *, threshold: float):
    """The duplicate of ``item`` among ``candidates`` ((similarity, memory), nearest first), or None.

    Only the first DUPLICATE_CANDIDATES in ``item``'s scope within ``threshold`` are compared by
    their numbers and dates, as the store's search finds no more.
    """
    scope = duplicate_scope_of(item)
    near = (row for similarity, row in candidates if similarity >= threshold and duplicate_scope_of(row) == scope)
    return next(
        (row for row in islice(near, DUPLICATE_CANDIDATES) if may_be_duplicates(row.content, item.content)), None
    )


def duplicate_scope_memories(item):
    """The active memories ``item`` (a memory or a draft) may be a duplicate of: its duplicate scope."""
    return Memory.objects.active().filter(duplicate_scope_q(duplicate_scope_of(item)))


def duplicate_candidates(*, item, embedding, threshold: float, limit: int = DUPLICATE_CANDIDATES):
    """The active memories of ``item``'s duplicate scope within ``threshold``, nearest first, each
    annotated with its ``similarity``.

    The nearest rows are found first and the threshold applied to them afterwards: a threshold in
    the WHERE clause of an HNSW scan makes it walk the whole graph whenever there is no duplicate
    (the usual case), and a small scope (one person's memories) needs an exact scan anyway.
    """
    near = nearest_memories(
        candidates=duplicate_scope_memories(item), embedding=embedding, limit=limit, min_similarity=threshold
    )
    return (
        Memory.objects.active()
        .filter(pk__in=[pk for pk, _ in near])
        .annotate(similarity=1 - CosineDistance("embedding", embedding))
        .order_by("-similarity", "pk")
    )
