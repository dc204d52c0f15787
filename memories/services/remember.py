"""Remember: the assistant's explicit "remember ..." (tool memory.remember)."""

from django.db import transaction

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.caller import Caller
from memories.models import Kind, Provenance, Scope, Source
from memories.services.store import MemoryDraft, StoreResult, memory_store

# "system" is the system's own; the assistant remembers for a person, a room or the household.
REMEMBER_SCOPES = (Scope.SHARED, Scope.ROOM, Scope.PRIVATE)
SCOPE_NOT_ALLOWED = f"'scope' must be one of: {', '.join(REMEMBER_SCOPES)}."


@transaction.atomic
def memory_remember(
    *,
    content: str,
    caller: Caller,
    language: str | None = None,
    scope: str = Scope.SHARED,
    kind: str = Kind.FACT,
    about=None,
    source_ref: str = "",
    actor: str | None = None,
) -> StoreResult:
    """Store what ``caller``'s speaker asked to remember in its room: confirmed, source tool; merges into a duplicate.

    It lifts the forget blocks the speaker could have made (tombstones of the scopes visible to
    them in this room) that the new content comes close to; blocks outside their view stay.
    Without a ``language`` the content's is detected; too short to tell: the caller's (its conversation's),
    then the speaker's. The audit names ``actor`` (``Actor.connection`` through an OAuth connection), by
    default the speaker.
    """
    speaker, room = caller.speaker, caller.room
    if scope not in REMEMBER_SCOPES:
        raise ApplicationError(SCOPE_NOT_ALLOWED, field="scope")
    draft = MemoryDraft.build(
        content=content,
        provenance=Provenance.CONFIRMED,
        source=Source.TOOL,
        language=language,
        conversation_language=caller.language,
        person=speaker,
        kind=kind,
        scope=scope,
        owner=speaker,  # memory_store checks the scope's holder and keeps only what the scope uses
        room=room,
        about=about,
        source_ref=source_ref,
    )
    return memory_store(draft=draft, actor=actor or Actor.speaker(speaker), lift_blocks_for=(speaker, room))
