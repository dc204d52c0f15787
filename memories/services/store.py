"""The one write path for new memories: validation, forget blocks, duplicate merge, insert."""

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from pgvector.django import CosineDistance

from justai_memory.errors import ApplicationError
from memories.embedders import Embedder
from memories.languages import LANGUAGE_CODE_REGEX
from memories.matching import may_be_duplicates
from memories.models import (
    PROVENANCE_RANK,
    AuditAction,
    Kind,
    Memory,
    Provenance,
    Scope,
    Source,
    Tombstone,
)
from memories.selectors.nearest import nearest_memories
from memories.selectors.tombstones import tombstone_hits
from memories.services.audit import audit_record
from memories.services.embeddings import active_embedder

logger = logging.getLogger(__name__)

MAX_CONTENT_CHARS = 4000
CONTENT_EMPTY = "Memory content must not be empty."
CONTENT_TOO_LONG = f"Memory content is longer than {MAX_CONTENT_CHARS} characters."
PRIVATE_NEEDS_OWNER = "A private memory needs an owner (a known speaker)."
ROOM_NEEDS_ROOM = "A room memory needs a room."
LANGUAGE_INVALID = "'language' must be an ISO 639-1 code such as de, it or en."
DUPLICATE_CANDIDATES = 5


class StoreOutcome:
    CREATED = "created"
    MERGED = "merged"
    BLOCKED = "blocked"


@dataclass
class StoreResult:
    outcome: str
    memory: Memory | None = None
    lifted_tombstones: list[int] = field(default_factory=list)
    blocking_tombstones: list[int] = field(default_factory=list)


@dataclass
class MemoryDraft:
    """What a caller wants stored; ``memory_store`` decides whether it is new, a duplicate or blocked."""

    content: str
    provenance: str
    source: str
    kind: str = Kind.FACT
    language: str = "en"
    scope: str = Scope.SHARED
    owner: object = None
    room: object = None
    about: object = None
    source_ref: str = ""
    subject: str = ""
    predicate: str = ""
    confidence: float = 1.0
    importance: float = 0.5
    valid_at: datetime | None = None


def _validate(draft: MemoryDraft) -> None:
    draft.content = (draft.content or "").strip()
    if not draft.content:
        raise ApplicationError(CONTENT_EMPTY, field="content")
    if len(draft.content) > MAX_CONTENT_CHARS:
        raise ApplicationError(CONTENT_TOO_LONG, field="content")
    for name, choices in (("kind", Kind), ("provenance", Provenance), ("source", Source), ("scope", Scope)):
        if getattr(draft, name) not in choices.values:
            raise ApplicationError(f"'{name}' must be one of: {', '.join(choices.values)}.", field=name)
    if draft.scope == Scope.PRIVATE and draft.owner is None:
        raise ApplicationError(PRIVATE_NEEDS_OWNER, field="scope")
    if draft.scope == Scope.ROOM and draft.room is None:
        raise ApplicationError(ROOM_NEEDS_ROOM, field="room")
    if draft.scope != Scope.PRIVATE:
        draft.owner = None
    if draft.scope != Scope.ROOM:
        draft.room = None
    if not isinstance(draft.language, str) or not re.match(LANGUAGE_CODE_REGEX, draft.language):
        raise ApplicationError(LANGUAGE_INVALID, field="language")
    for name in ("confidence", "importance"):
        value = getattr(draft, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ApplicationError(f"'{name}' must be a number from 0 to 1.", field=name)
    draft.subject = draft.subject.strip().lower()
    draft.predicate = draft.predicate.strip().lower()


def duplicate_candidates(*, draft: MemoryDraft, embedding, threshold: float):
    """Active memories of the same scope/owner/room within ``threshold``, nearest first.

    The nearest rows are found first and the threshold applied to them afterwards: a threshold in
    the WHERE clause of an HNSW scan makes it walk the whole graph whenever there is no duplicate
    (the usual case), and a small scope (one person's memories) needs an exact scan anyway.
    """
    # The scope constraints make these equivalent to (scope, owner, room); one column each gives
    # PostgreSQL a row estimate it gets right (the three together it underestimates, and then
    # ranks thousands of rows exactly instead of using the HNSW index).
    if draft.scope == Scope.PRIVATE:
        scope = Memory.objects.active().filter(owner=draft.owner)
    elif draft.scope == Scope.ROOM:
        scope = Memory.objects.active().filter(room=draft.room)
    else:
        scope = Memory.objects.active().filter(scope=draft.scope)
    near = nearest_memories(candidates=scope, embedding=embedding, limit=DUPLICATE_CANDIDATES, min_similarity=threshold)
    return (
        Memory.objects.active()
        .filter(pk__in=[pk for pk, _ in near])
        .alias(distance=CosineDistance("embedding", embedding))
        .order_by("distance", "pk")
    )


def _merge_into(existing: Memory, draft: MemoryDraft, embedding) -> Memory:
    """Fold the draft into an existing duplicate: the higher provenance wins; counts, scores and dates merge."""
    if PROVENANCE_RANK[draft.provenance] > PROVENANCE_RANK[existing.provenance]:
        existing.content, existing.language, existing.embedding = draft.content, draft.language, embedding
        existing.provenance, existing.source, existing.source_ref = draft.provenance, draft.source, draft.source_ref
        existing.kind = draft.kind
    existing.occurrences += 1
    existing.confidence = max(existing.confidence, draft.confidence)
    existing.importance = max(existing.importance, draft.importance)
    if draft.valid_at and draft.valid_at < existing.valid_at:
        existing.valid_at = draft.valid_at
    existing.subject = existing.subject or draft.subject
    existing.predicate = existing.predicate or draft.predicate
    existing.about = existing.about or draft.about
    existing.save()
    return existing


@transaction.atomic
def memory_store(
    *,
    draft: MemoryDraft,
    actor: str,
    lift_blocks_for=None,
    embedding: np.ndarray | None = None,
    embedder: Embedder | None = None,
) -> StoreResult:
    """Store a memory, merge it into a duplicate, or drop it when a forget block covers it.

    With ``lift_blocks_for=(speaker, room)`` (an explicit "remember"), the tombstones that speaker
    could have made are lifted instead; blocks outside their view are left in place.
    """
    _validate(draft)
    embedder = embedder or active_embedder()
    if embedding is None:
        embedding = embedder.embed_documents([draft.content])[0]

    lifted: list[int] = []
    if lift_blocks_for is not None:
        speaker, room = lift_blocks_for
        visible = Tombstone.objects.visible_to(speaker=speaker, room=room)
        lifted = tombstone_hits(content=draft.content, embedding=embedding, embedder=embedder, tombstones=visible)
        if lifted:
            lifted_memory_ids = list(Tombstone.objects.filter(pk__in=lifted).values_list("memory_id", flat=True))
            Tombstone.objects.filter(pk__in=lifted).delete()
            audit_record(memory_ids=[m or 0 for m in lifted_memory_ids], action=AuditAction.BLOCK_LIFTED, actor=actor)
    else:
        blocking = tombstone_hits(content=draft.content, embedding=embedding, embedder=embedder)
        if blocking:
            return StoreResult(outcome=StoreOutcome.BLOCKED, blocking_tombstones=blocking)

    for existing in duplicate_candidates(draft=draft, embedding=embedding, threshold=embedder.thresholds.duplicate)[
        :DUPLICATE_CANDIDATES
    ].select_for_update():
        if may_be_duplicates(existing.content, draft.content):
            merged = _merge_into(existing, draft, embedding)
            audit_record(memory_ids=[merged.pk], action=AuditAction.MERGED, actor=actor)
            return StoreResult(outcome=StoreOutcome.MERGED, memory=merged, lifted_tombstones=lifted)

    memory = Memory(
        kind=draft.kind,
        content=draft.content,
        language=draft.language,
        embedding=embedding,
        provenance=draft.provenance,
        confidence=draft.confidence,
        importance=draft.importance,
        source=draft.source,
        source_ref=draft.source_ref,
        scope=draft.scope,
        owner=draft.owner,
        room=draft.room,
        about=draft.about,
        subject=draft.subject,
        predicate=draft.predicate,
        valid_at=draft.valid_at or timezone.now(),
    )
    try:
        # The table's constraints are checked by _validate and again by PostgreSQL on INSERT, and the
        # related rows come in as loaded instances: checking them here too would cost one query (and
        # two savepoints) each, ~45 round trips per store.
        memory.full_clean(
            exclude=["embedding", "search_vector", "owner", "room", "about", "superseded_by"],
            validate_constraints=False,
        )
    except ValidationError as exc:
        field_name, errors = next(iter(exc.message_dict.items()))
        raise ApplicationError(" ".join(errors), field=field_name) from exc
    memory.save()
    audit_record(memory_ids=[memory.pk], action=AuditAction.CREATED, actor=actor)
    return StoreResult(outcome=StoreOutcome.CREATED, memory=memory, lifted_tombstones=lifted)
