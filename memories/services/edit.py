"""Admin writes on memories: editing one (re-embedded, re-checked for duplicates) and adding a note."""

import logging
from dataclasses import dataclass, field, fields
from datetime import datetime

import numpy as np
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction
from django.utils.translation import gettext_lazy as _

from justai_core.errors import ApplicationError
from memories.embedding_space import active_embedder
from memories.models import AuditAction, Kind, Memory, Provenance, Scope, Source, Status
from memories.selectors.duplicates import DUPLICATE_CANDIDATES, duplicate_candidates, nearest_duplicate
from memories.selectors.tombstones import tombstone_hits
from memories.services.audit import audit_record
from memories.services.fold import memories_merge_away
from memories.services.store import (
    MemoryDraft,
    StoreOutcome,
    StoreResult,
    memory_fields_validate,
    memory_store,
)
from people.models import Person, Room

logger = logging.getLogger(__name__)

# In the language of the request (the admin shows them on the form): the menu they point to is named in it.
NOTE_BLOCKED = _(
    "A forget block covers this note (forget block {ids}). Lift it under Forget blocks first if it should "
    "be remembered again."
)
EDIT_BLOCKED = _(
    "A forget block covers this text (forget block {ids}). Lift it under Forget blocks first if it should "
    "be remembered again."
)


class _Unchanged:
    def __repr__(self):
        return "UNCHANGED"


UNCHANGED = _Unchanged()


@dataclass(frozen=True)
class MemoryChanges:
    """What an admin changes on a memory: the fields given; the rest stay UNCHANGED.

    Only these fields are editable; machine fields (counts, source, status) are not.
    """

    content: str | _Unchanged = UNCHANGED
    kind: str | _Unchanged = UNCHANGED
    language: str | _Unchanged = UNCHANGED
    provenance: str | _Unchanged = UNCHANGED
    confidence: float | _Unchanged = UNCHANGED
    importance: float | _Unchanged = UNCHANGED
    scope: str | _Unchanged = UNCHANGED
    owner: Person | _Unchanged | None = UNCHANGED
    room: Room | _Unchanged | None = UNCHANGED
    about: Person | _Unchanged | None = UNCHANGED
    subject: str | _Unchanged = UNCHANGED
    predicate: str | _Unchanged = UNCHANGED
    valid_at: datetime | _Unchanged = UNCHANGED

    def given(self) -> dict:
        """The changed fields' names and new values."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not UNCHANGED}


EDITABLE_FIELDS = tuple(f.name for f in fields(MemoryChanges))


@dataclass
class EditResult:
    memory: Memory
    changed: list[str] = field(default_factory=list)
    merged_ids: list[int] = field(default_factory=list)


@transaction.atomic
def memory_edit(*, memory: Memory, actor: str, changes: MemoryChanges) -> EditResult:
    """Change an admin-editable field or several; re-embed when the text changed; fold in a duplicate; audit 'edited'.

    A new text that a forget block covers is refused (ApplicationError 409 naming the tombstones), as a note is.

    A duplicate (same rule as ``memory_store``: same scope/owner/room, similarity at the embedder's
    ``duplicate`` threshold, same numbers and dates) is merged into the edited memory, which keeps
    the admin's text; its counts and dates are added, and it is audited as 'merged'.
    """
    memory = Memory.objects.select_for_update().get(pk=memory.pk)
    changed = _apply_changes(memory, changes.given())
    if not changed:
        return EditResult(memory=memory)
    _validate_edited(memory)
    embedder = active_embedder()
    if "content" in changed:
        _re_embed(memory, embedder=embedder)
    merged_ids: list[int] = []
    if memory.status == Status.ACTIVE and {"content", "scope", "owner", "room"} & set(changed):
        merged_ids = _merge_duplicate_into(memory, threshold=embedder.thresholds.duplicate)
    memory.save()
    memory.refresh_from_db(fields=["search_vector"])
    _audit_edit(memory, actor=actor, merged_ids=merged_ids)
    logger.info("memory %s edited by %s (fields %s, merged %s)", memory.pk, actor, ",".join(changed), merged_ids)
    return EditResult(memory=memory, changed=changed, merged_ids=merged_ids)


def _apply_changes(memory: Memory, changes: dict) -> list[str]:
    """Set the given fields that differ from the memory's; returns their names."""
    changed = [name for name, value in changes.items() if getattr(memory, name) != value]
    for name in changed:
        setattr(memory, name, changes[name])
    return changed


def _validate_edited(memory: Memory) -> None:
    """The store path's field rules, then the model's own (dates, lengths, constraints)."""
    memory_fields_validate(memory)
    try:
        memory.full_clean(exclude=["embedding", "search_vector"])
    except ValidationError as exc:
        field_name, errors = next(iter(exc.message_dict.items()))
        raise ApplicationError(" ".join(errors), field=None if field_name == NON_FIELD_ERRORS else field_name) from exc


def _re_embed(memory: Memory, *, embedder) -> None:
    """A new text's vector; refused when a forget block covers it."""
    memory.embedding = embedder.embed_documents([memory.content])[0]
    # The store path's rule: an edit must not write forgotten content back (by meaning or by value).
    blocking = tombstone_hits(content=memory.content, embedding=memory.embedding, embedder=embedder)
    if blocking:
        ids = ", ".join(f"#{pk}" for pk in blocking)
        raise ApplicationError(str(EDIT_BLOCKED).format(ids=ids), field="content", status=409)


def _merge_duplicate_into(memory: Memory, *, threshold: float) -> list[int]:
    """Merge the nearest duplicate of the edited memory into it (the edit's text stays); returns its id, if any."""
    candidates = (
        duplicate_candidates(item=memory, embedding=np.asarray(memory.embedding), threshold=threshold)
        .exclude(pk=memory.pk)[:DUPLICATE_CANDIDATES]
        .select_for_update()
    )
    other = nearest_duplicate(memory, ((row.similarity, row) for row in candidates), threshold=threshold)
    if other is None:
        return []
    # Counts, scores and dates merge into the edited memory (its save writes them).
    memories_merge_away(groups=[(memory, [other])])
    return [other.pk]


def _audit_edit(memory: Memory, *, actor: str, merged_ids: list[int]) -> None:
    audit_record(memory_ids=[memory.pk], action=AuditAction.EDITED, actor=actor)
    for other_id in merged_ids:
        audit_record(memory_ids=[memory.pk], action=AuditAction.MERGED, actor=actor, related_memory_id=other_id)
        audit_record(memory_ids=[other_id], action=AuditAction.MERGED, actor=actor, related_memory_id=memory.pk)


def memory_note_add(
    *,
    content: str,
    actor: str,
    language: str | None = None,
    scope: str = Scope.SHARED,
    owner: Person | None = None,
    room: Room | None = None,
    about: Person | None = None,
    importance: float = 0.5,
    embedding: np.ndarray | None = None,
) -> StoreResult:
    """Store an admin's note (kind note, source admin, confirmed) through ``memory_store``; may merge into a duplicate.

    Raises ApplicationError when a forget block covers it: an admin lifts a block explicitly, under Forget blocks.
    Without a ``language`` the note's is detected (falling back to the owner's, then the person's it is about).
    """
    draft = MemoryDraft.build(
        content=content,
        provenance=Provenance.CONFIRMED,
        source=Source.ADMIN,
        language=language,
        person=owner or about,
        kind=Kind.NOTE,
        scope=scope,
        owner=owner,
        room=room,
        about=about,
        source_ref=actor,
        importance=importance,
    )
    result = memory_store(draft=draft, actor=actor, embedding=embedding)
    if result.outcome == StoreOutcome.BLOCKED:
        ids = ", ".join(f"#{pk}" for pk in result.blocking_tombstones)
        raise ApplicationError(str(NOTE_BLOCKED).format(ids=ids), field="content", status=409)
    return result
