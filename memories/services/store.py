"""The one write path for new memories: validation, forget blocks, duplicate merge, insert."""

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.embedders import Embedder, vector_literal
from memories.embedding_space import active_embedder
from memories.languages import language_check, language_for
from memories.limits import MAX_TEXT_CHARS
from memories.locks import LockId, advisory_xact_locks_wait
from memories.models import (
    PROVENANCE_RANK,
    AuditAction,
    AuditEvent,
    Kind,
    Memory,
    Provenance,
    Scope,
    Source,
    Tombstone,
    visible_scopes,
)
from memories.scopes import (
    duplicate_scope,
    duplicate_scope_lock_key,
    duplicate_scope_of,
    scope_holders_check,
)
from memories.selectors.duplicates import DUPLICATE_CANDIDATES, duplicate_scope_memories, nearest_duplicate
from memories.selectors.nearest import nearest_memories_many
from memories.selectors.tombstones import tombstone_hits_many
from memories.services.fold import memories_fold

logger = logging.getLogger(__name__)

CONTENT_EMPTY = "Memory content must not be empty."
CONTENT_TOO_LONG = f"Memory content is longer than {MAX_TEXT_CHARS} characters."
# A guess (provenance inferred) is never stored surer than this; confirming it lifts the cap (merge).
INFERRED_MAX_CONFIDENCE = 0.5


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

    @classmethod
    def build(
        cls,
        *,
        content: str,
        provenance: str,
        source: str,
        language: str | None = None,
        conversation_language: str | None = None,
        person=None,
        languages: frozenset[str] | None = None,
        **fields,
    ) -> "MemoryDraft":
        """The draft every write path stores: ``fields`` as given, and its language settled.

        Without a ``language`` the content's is detected (among ``languages``, when a caller resolves
        many texts); too short to tell: ``conversation_language``, then the preferred language of
        ``person`` (the speaker, or whom the memory is owned by or about), then the default
        (``language_for``). The scope's holder (a private memory's owner) is checked when it is
        stored (``memory_fields_validate``).
        """
        if language is None:
            language = language_for(
                text=content if isinstance(content, str) else "",
                conversation_language=conversation_language,
                speaker_language=person.preferred_language if person is not None else None,
                languages=languages,
            )
        return cls(content=content, provenance=provenance, source=source, language=language, **fields)


def memory_fields_validate(item: MemoryDraft | Memory) -> None:
    """The field rules every write of a memory shares (a new draft, an edited memory), applied in place.

    The content is trimmed, not empty and at most ``MAX_TEXT_CHARS``; kind, provenance, source and
    scope are among their choices; a private memory has an owner and a room memory a room, and
    owner and room are what the scope keeps; the language is known; confidence and importance are
    numbers from 0 to 1; subject and predicate are trimmed and lower-cased. ApplicationError names
    the field at fault.
    """
    item.content = (item.content or "").strip()
    if not item.content:
        raise ApplicationError(CONTENT_EMPTY, field="content")
    if len(item.content) > MAX_TEXT_CHARS:
        raise ApplicationError(CONTENT_TOO_LONG, field="content")
    for name, choices in (("kind", Kind), ("provenance", Provenance), ("source", Source), ("scope", Scope)):
        if getattr(item, name) not in choices.values:
            raise ApplicationError(f"'{name}' must be one of: {', '.join(choices.values)}.", field=name)
    item.owner, item.room = scope_holders_check(scope=item.scope, owner=item.owner, room=item.room)
    language_check(item.language)
    for name in ("confidence", "importance"):
        value = getattr(item, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise ApplicationError(f"'{name}' must be a number from 0 to 1.", field=name)
    item.subject = item.subject.strip().lower()
    item.predicate = item.predicate.strip().lower()


def _validate(draft: MemoryDraft) -> None:
    """A new draft: the shared field rules, then a guess's confidence capped (an edit may set it higher)."""
    memory_fields_validate(draft)
    if draft.provenance == Provenance.INFERRED:
        draft.confidence = min(draft.confidence, INFERRED_MAX_CONFIDENCE)


# Stores into one duplicate scope (scope, owner, room) run one at a time: two concurrent stores of the
# same content would otherwise both find no duplicate and both insert. A transaction-level advisory
# lock per scope (LockId.MEMORY_STORE), taken before the forget-block check and the duplicate search
# and held until commit; under READ COMMITTED what follows sees what the previous holder committed.
# Forgetting takes the same locks (memories/services/forget.py): a remember and a forget of one fact
# then end as one of their two serial orders, never as a new row beside the block it should have
# lifted. Other scopes do not wait.
def duplicate_scopes_lock(*, scopes) -> None:
    """Wait for the store locks of these duplicate scopes (``DuplicateScope``); they end with the transaction."""
    advisory_xact_locks_wait(LockId.MEMORY_STORE, keys=[duplicate_scope_lock_key(key) for key in scopes])


# One statement for every block of a batch: each tombstone counts the items it dropped and when.
RECORD_BLOCKS_SQL = """
UPDATE memories_tombstone t SET blocked_count = t.blocked_count + c.n, last_blocked_at = %s
FROM (SELECT id, count(*) AS n FROM unnest(%s::bigint[]) AS id GROUP BY id) c
WHERE t.id = c.id RETURNING t.id, t.memory_id
"""


def _record_blocks(*, tombstone_ids: list[int]) -> dict[int, int | None]:
    """Count the drops on their tombstones; returns tombstone id -> the id its memory had."""
    if not tombstone_ids:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(RECORD_BLOCKS_SQL, [timezone.now(), tombstone_ids])
        return dict(cursor.fetchall())


_VALIDATED = ("content", "kind", "provenance", "source", "scope")


def _new_memory(draft: MemoryDraft) -> Memory:
    """The row a draft becomes when it is new, checked against the model's field rules (no vector yet)."""
    memory = Memory(
        kind=draft.kind,
        content=draft.content,
        language=draft.language,
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
        # two savepoints) each, ~45 round trips per store. The fields _validate checked as strictly
        # (content not empty, the choices) are not checked twice.
        memory.full_clean(
            exclude=[*("embedding", "search_vector", "owner", "room", "about", "superseded_by"), *_VALIDATED],
            validate_constraints=False,
        )
    except ValidationError as exc:
        field_name, errors = next(iter(exc.message_dict.items()))
        raise ApplicationError(" ".join(errors), field=field_name) from exc
    return memory


def _merge_into(existing: Memory, draft: MemoryDraft, embedding) -> set[str]:
    """Fold the draft into a duplicate (in memory): the higher provenance wins; counts, scores and dates merge.

    Returns the names of the fields that changed; the caller saves.
    """
    before = {name: getattr(existing, name) for name in _MERGED_FIELDS}
    if PROVENANCE_RANK[draft.provenance] > PROVENANCE_RANK[existing.provenance]:
        existing.content, existing.language, existing.embedding = draft.content, draft.language, embedding
        existing.source, existing.source_ref, existing.kind = draft.source, draft.source_ref, draft.kind
    incoming = Memory(
        provenance=draft.provenance,
        confidence=draft.confidence,
        importance=draft.importance,
        valid_at=draft.valid_at,  # None: the draft gives no date, so the duplicate's stays
        created_at=None,
        subject=draft.subject,
        predicate=draft.predicate,
        about=draft.about,
    )
    memories_fold(kept=existing, others=[incoming])
    return {name for name, value in before.items() if getattr(existing, name) is not value}


_MERGED_FIELDS = (
    *("content", "language", "embedding", "provenance", "source", "source_ref", "kind", "occurrences"),
    *("confidence", "importance", "valid_at", "subject", "predicate", "about_id"),
)


def _vector_sql(vector) -> RawSQL:
    # pgvector's VectorField formats a vector as Python floats (~1.5 ms for 512 values); this is the
    # same value as a literal in a fifth of the time. The caller puts the array back after saving.
    return RawSQL("%s::vector", [vector_literal(vector)], output_field=Memory._meta.get_field("embedding"))


def _similarity(a, b, *, norm_a, norm_b) -> float:
    """Cosine similarity, given ``np.linalg.norm`` of each (each vector's norm is taken once per batch)."""
    return float(np.dot(a, b) / ((norm_a * norm_b) or 1.0))


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
    # The batch of one: the same rules, and as fast (measured); memory_store_batch is the transaction.
    return memory_store_batch(
        drafts=[draft],
        actor=actor,
        lift_blocks_for=lift_blocks_for,
        embeddings=None if embedding is None else [embedding],
        embedder=embedder,
    )[0]


@transaction.atomic
def memory_store_batch(
    *,
    drafts: list[MemoryDraft],
    actor: str,
    lift_blocks_for=None,
    embeddings=None,
    embedder: Embedder | None = None,
) -> list[StoreResult]:
    """``memory_store`` for many drafts at once, with the same outcomes as storing them one by one in order.

    Every draft is validated before anything is written (one invalid draft: ApplicationError, nothing
    stored). Drafts of one batch merge with each other as they would one after the other. The work is
    set-based: one embedding call, one statement for the forget blocks (per tombstone embedder), one
    for the nearest memories of all drafts, one to lock the duplicates found, one INSERT of the new
    rows, one of the audit events (and one UPDATE per merged row).
    """
    drafts = list(drafts)
    for draft in drafts:
        _validate(draft)
    new_rows = [_new_memory(draft) for draft in drafts]
    if not drafts:
        return []
    embedder = embedder or active_embedder()
    embeddings = _embeddings_of(drafts=drafts, embeddings=embeddings, embedder=embedder)
    _scopes_lock(drafts=drafts, lift_blocks_for=lift_blocks_for)
    blocks = _forget_blocks(
        contents=[draft.content for draft in drafts],
        embeddings=embeddings,
        embedder=embedder,
        lift_blocks_for=lift_blocks_for,
    )
    threshold = embedder.thresholds.duplicate
    open_items = [index for index, blocking in enumerate(blocks.blocking) if not blocking]
    near, stored = _stored_duplicates(drafts=drafts, embeddings=embeddings, open_items=open_items, threshold=threshold)
    batch = _Batch(stored=stored)
    results: list[StoreResult] = []
    for index, (draft, embedding) in enumerate(zip(drafts, embeddings, strict=True)):
        if blocks.blocking[index]:
            # The text-free trail: "blocked" on the forgotten memory's old id, once per block per item.
            batch.events.extend((blocks.gone.get(pk) or 0, AuditAction.BLOCKED) for pk in blocks.blocking[index])
            results.append(StoreResult(outcome=StoreOutcome.BLOCKED, blocking_tombstones=blocks.blocking[index]))
            continue
        batch.events.extend((blocks.gone.get(pk) or 0, AuditAction.BLOCK_LIFTED) for pk in blocks.lifted[index])
        result = _merge_or_create(
            draft=draft,
            embedding=embedding,
            new_row=new_rows[index],
            near=near[index],
            batch=batch,
            threshold=threshold,
        )
        result.lifted_tombstones = blocks.lifted[index]
        results.append(result)
    _write(batch=batch, actor=actor)
    return results


def _scopes_lock(*, drafts: list[MemoryDraft], lift_blocks_for) -> None:
    """Before the blocks are read: a forget of the same scope commits either before (its block is seen)
    or after (it sees what this store wrote). A remember lifts blocks of every scope it sees."""
    locked = {duplicate_scope_of(draft) for draft in drafts}
    if lift_blocks_for is not None:
        speaker, room = lift_blocks_for
        locked.update(
            duplicate_scope(scope=s, owner_id=o, room_id=r) for s, o, r in visible_scopes(speaker=speaker, room=room)
        )
    duplicate_scopes_lock(scopes=locked)


def _embeddings_of(*, drafts: list[MemoryDraft], embeddings, embedder: Embedder) -> list[np.ndarray]:
    """The given vectors (one per draft) as float32, or the drafts' contents embedded in one call."""
    if embeddings is None:
        embeddings = embedder.embed_documents([draft.content for draft in drafts])
    embeddings = [np.asarray(vector, dtype=np.float32) for vector in embeddings]
    if len(embeddings) != len(drafts):
        raise ValueError("memory_store_batch needs one embedding per draft.")
    return embeddings


@dataclass
class _Blocks:
    """Per draft, the tombstones that block it and those it lifted; tombstone id -> the id its memory had."""

    blocking: list[list[int]]
    lifted: list[list[int]]
    gone: dict[int, int | None]


def _forget_blocks(*, contents: list[str], embeddings, embedder: Embedder, lift_blocks_for) -> _Blocks:
    """The forget blocks of every draft: counted on their tombstones, or lifted for an explicit remember."""
    blocks = _Blocks(blocking=[[] for _ in contents], lifted=[[] for _ in contents], gone={})
    if lift_blocks_for is None:
        blocks.blocking = tombstone_hits_many(contents=contents, embeddings=embeddings, embedder=embedder)
        blocks.gone = _record_blocks(tombstone_ids=[pk for hits in blocks.blocking for pk in hits])
        return blocks
    speaker, room = lift_blocks_for
    visible = Tombstone.objects.visible_to(speaker=speaker, room=room)
    seen: set[int] = set()
    for index, hits in enumerate(
        tombstone_hits_many(contents=contents, embeddings=embeddings, embedder=embedder, tombstones=visible)
    ):
        blocks.lifted[index] = [pk for pk in hits if pk not in seen]  # an earlier draft lifted the others
        seen.update(hits)
    if seen:
        blocks.gone = dict(Tombstone.objects.filter(pk__in=seen).values_list("pk", "memory_id"))
        Tombstone.objects.filter(pk__in=seen).delete()
    return blocks


def _stored_duplicates(
    *, drafts: list[MemoryDraft], embeddings, open_items: list[int], threshold: float
) -> tuple[dict[int, list], dict[int, Memory]]:
    """The stored memories the open drafts may merge with (their scopes were locked before the blocks were read).

    Returns, per draft index, its nearest (id, similarity) within ``threshold``, and the rows found,
    locked and re-read (id -> Memory).
    """
    scopes: dict[tuple, object] = {}  # one queryset per scope, so that its filter is compiled once
    searches = []
    for index in open_items:
        draft = drafts[index]
        key = duplicate_scope_of(draft)
        if key not in scopes:
            scopes[key] = duplicate_scope_memories(draft)
        searches.append((scopes[key], embeddings[index]))
    found = nearest_memories_many(searches=searches, limit=DUPLICATE_CANDIDATES, min_similarity=threshold)
    near = dict(zip(open_items, found, strict=True))
    found_ids = {pk for rows in near.values() for pk, _ in rows}
    stored = (
        {row.pk: row for row in Memory.objects.active().filter(pk__in=found_ids).order_by("pk").select_for_update()}
        if found_ids
        else {}
    )
    return near, stored


@dataclass
class _Batch:
    """What a batch has decided so far, written at its end by ``_write``.

    ``touched``: rows this batch created or merged into, with their vectors as they are now: later
    drafts compare with these in memory (the database has not seen the changes yet). A stored row
    whose vector a merge replaced is compared with its new vector; the database's nearest 5 were
    taken before, which differs from one-by-one stores only when more than 5 stored rows pass the
    duplicate threshold.
    """

    stored: dict[int, Memory]
    touched: dict[int, tuple[Memory, np.ndarray, np.floating]] = field(
        default_factory=dict
    )  # id() -> row, vector, norm
    changed: dict[int, set[str]] = field(default_factory=dict)  # stored row id -> fields a merge changed
    events: list[tuple[object, str]] = field(default_factory=list)  # (memory or memory id, action), in store order


def _merge_or_create(
    *, draft: MemoryDraft, embedding, new_row: Memory, near: list, batch: _Batch, threshold: float
) -> StoreResult:
    """Merge an open draft into its duplicate (stored, or made earlier in the batch), or make its new row."""
    norm = np.linalg.norm(embedding)
    target = _duplicate_of(draft=draft, embedding=embedding, norm=norm, near=near, batch=batch, threshold=threshold)
    if target is None:
        new_row.embedding = embedding
        batch.touched[id(new_row)] = (new_row, embedding, norm)
        batch.events.append((new_row, AuditAction.CREATED))
        return StoreResult(outcome=StoreOutcome.CREATED, memory=new_row)
    fields = _merge_into(target, draft, embedding)
    if target.pk is not None:
        batch.changed.setdefault(target.pk, set()).update(fields)
    previous = batch.touched.get(id(target))
    vector = embedding if "embedding" in fields else (previous[1] if previous else target.embedding)
    vector = np.asarray(vector, dtype=np.float32)
    batch.touched[id(target)] = (target, vector, np.linalg.norm(vector))
    batch.events.append((target, AuditAction.MERGED))
    return StoreResult(outcome=StoreOutcome.MERGED, memory=target)


def _duplicate_of(*, draft: MemoryDraft, embedding, norm, near: list, batch: _Batch, threshold: float) -> Memory | None:
    """The nearest of the stored and the batch's rows that is a duplicate of the draft (memories.selectors.duplicates)."""
    candidates = [
        (similarity, pk, batch.stored[pk])
        for pk, similarity in near
        if pk in batch.stored and id(batch.stored[pk]) not in batch.touched
    ]
    for row, vector, vector_norm in batch.touched.values():
        candidates.append((_similarity(vector, embedding, norm_a=vector_norm, norm_b=norm), row.pk or math.inf, row))
    candidates.sort(key=lambda candidate: (-candidate[0], candidate[1]))  # stable: new rows in the order they were made
    return nearest_duplicate(draft, ((similarity, row) for similarity, _, row in candidates), threshold=threshold)


def _write(*, batch: _Batch, actor: str) -> None:
    """One INSERT of the new rows, one UPDATE per merged stored row, one INSERT of the audit events."""
    inserts = [row for row, _, _ in batch.touched.values() if row.pk is None]
    if inserts:
        vectors = [row.embedding for row in inserts]
        for row, vector in zip(inserts, vectors, strict=True):
            row.embedding = _vector_sql(vector)
        Memory.objects.bulk_create(inserts)
        for row, vector in zip(inserts, vectors, strict=True):
            row.embedding = vector
    for pk, fields in batch.changed.items():
        row = batch.stored[pk]
        vector = row.embedding
        if "embedding" in fields:
            row.embedding = _vector_sql(vector)
        row.save(update_fields=[*fields, "updated_at"])
        row.embedding = vector
    if batch.events:
        AuditEvent.objects.bulk_create(
            AuditEvent(memory_id=getattr(memory, "pk", memory), action=action, actor=actor)
            for memory, action in batch.events
        )
