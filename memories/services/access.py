"""Recall's access counts (MemoryAccess) when memories merge: the one that stays adds up the others'."""

from datetime import datetime

from django.db import connection

# Added to what the row holds now, not overwritten: a recall that bumps the memory meanwhile keeps
# its count. A memory without a row gets one.
ADD_ACCESSES_SQL = """
INSERT INTO memories_memoryaccess AS a (memory_id, count, last_accessed_at)
SELECT * FROM unnest(%s::bigint[], %s::integer[], %s::timestamptz[])
ON CONFLICT (memory_id) DO UPDATE
SET count = a.count + EXCLUDED.count, last_accessed_at = greatest(a.last_accessed_at, EXCLUDED.last_accessed_at)
"""


def access_of(memories) -> tuple[int, datetime | None]:
    """The summed access count and the latest access of ``memories`` (Memory objects)."""
    accessed = [m.last_accessed_at for m in memories if m.last_accessed_at]
    return sum(m.access_count for m in memories), max(accessed) if accessed else None


def add_accesses(added: dict[int, tuple[int, datetime | None]]) -> None:
    """Add (count, latest access) to each memory id's access row; entries that add nothing are skipped."""
    rows = [(pk, count, last) for pk, (count, last) in added.items() if last is not None]
    if rows:
        with connection.cursor() as cursor:
            cursor.execute(ADD_ACCESSES_SQL, [list(column) for column in zip(*rows, strict=True)])
