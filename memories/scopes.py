"""The scope rule every write path shares: which owner and room a memory of a scope keeps."""

from memories.models import Scope


def scope_holders(*, scope: str, owner, room) -> tuple:
    """(owner, room) as a memory of ``scope`` stores them: an owner only when private, a room only when room-scoped.

    Whether a private memory has an owner (or a room memory a room) is checked by the callers'
    messages and by the table's constraints; this only clears what the scope does not use.
    """
    return (owner if scope == Scope.PRIVATE else None, room if scope == Scope.ROOM else None)
