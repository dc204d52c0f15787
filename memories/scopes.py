"""The scope rules every write path shares: which owner and room a memory of a scope keeps, and which
memories share a duplicate scope (may be merged as duplicates or supersede one another)."""

from typing import NamedTuple

from django.db.models import Q

from justai_core.errors import ApplicationError
from memories.models import SCOPE_HOLDER, Scope

# Per holder (memories.models.SCOPE_HOLDER): the message when it is missing, and what the caller must send.
HOLDER_MISSING = {
    "owner": ("A private memory needs its owner, a known speaker.", "speaker_id"),
    "room": ("A room memory needs a room.", "room_id"),
}


def scope_holders(*, scope: str, owner, room) -> tuple:
    """(owner, room) as a memory of ``scope`` stores them: an owner only when private, a room only when room-scoped.

    This only clears what the scope does not use; ``scope_holders_check`` refuses a missing holder.
    """
    holder = SCOPE_HOLDER.get(scope)
    return (owner if holder == "owner" else None, room if holder == "room" else None)


def scope_holders_check(*, scope: str, owner, room) -> tuple:
    """``scope_holders``, after refusing a scope without its holder: ApplicationError naming the field
    ``scope`` and what is needed (``speaker_id`` for a private memory's owner, ``room_id`` for a room's).

    The write paths' side of the rule the table's constraint holds (every new draft, every edit).
    """
    holder = SCOPE_HOLDER.get(scope)
    if holder is not None and {"owner": owner, "room": room}[holder] is None:
        message, needs = HOLDER_MISSING[holder]
        raise ApplicationError(message, field="scope", needs=needs)
    return scope_holders(scope=scope, owner=owner, room=room)


class DuplicateScope(NamedTuple):
    """The same-scope rule, in one place: two memories may be duplicates of each other (the store
    path, edits and consolidation merge them) or contradict each other (consolidation supersedes)
    only when their duplicate scopes are equal: the same scope, the same owner (private) and the
    same room (room). Shared and system memories each form one scope."""

    scope: str
    owner_id: int | None
    room_id: int | None


def duplicate_scope(*, scope: str, owner_id: int | None, room_id: int | None) -> DuplicateScope:
    owner_id, room_id = scope_holders(scope=scope, owner=owner_id, room=room_id)
    return DuplicateScope(scope, owner_id, room_id)


def duplicate_scope_of(item) -> DuplicateScope:
    """The duplicate scope of a Memory or of a draft (whose ``owner`` and ``room`` are instances)."""
    owner_id = item.owner_id if hasattr(item, "owner_id") else getattr(item.owner, "pk", None)
    room_id = item.room_id if hasattr(item, "room_id") else getattr(item.room, "pk", None)
    return duplicate_scope(scope=item.scope, owner_id=owner_id, room_id=room_id)


def duplicate_scope_q(key: DuplicateScope) -> Q:
    """The memories of the duplicate scope ``key``, as a filter on the memory table.

    The scope constraints make one column enough (owner for private, room for room, else scope);
    one column each gives PostgreSQL a row estimate it gets right (the three together it
    underestimates, and then ranks thousands of rows exactly instead of using the HNSW index).
    """
    if key.scope == Scope.PRIVATE:
        return Q(owner_id=key.owner_id)
    if key.scope == Scope.ROOM:
        return Q(room_id=key.room_id)
    return Q(scope=key.scope)


# Stores into one duplicate scope run one at a time (memories.services.store); the int4 key of the
# transaction-level advisory lock (LockId.MEMORY_STORE). Collisions only make unrelated stores wait.
def duplicate_scope_lock_key(key: DuplicateScope) -> int:
    if key.scope == Scope.PRIVATE:
        return (key.owner_id * 4) & 0x7FFFFFFF
    if key.scope == Scope.ROOM:
        return (key.room_id * 4 + 1) & 0x7FFFFFFF
    return 2 if key.scope == Scope.SHARED else 3


# The same rule in SQL: the columns that name a memory's duplicate scope (owner and room are never 0:
# ids start at 1), for statements that group or join memories by it.
DUPLICATE_SCOPE_KEYS = "scope, owner_key, room_key"


def duplicate_scope_columns(alias: str) -> str:
    """``alias.scope, owner_key, room_key`` as SELECT columns of the memory table aliased ``alias``."""
    return (
        f"{alias}.scope AS scope, coalesce({alias}.owner_id, 0) AS owner_key, coalesce({alias}.room_id, 0) AS room_key"
    )


def duplicate_scope_join(left: str, right: str) -> str:
    """The join condition of two relations that carry ``DUPLICATE_SCOPE_KEYS``: the same duplicate scope."""
    return " AND ".join(f"{right}.{column} = {left}.{column}" for column in DUPLICATE_SCOPE_KEYS.split(", "))
