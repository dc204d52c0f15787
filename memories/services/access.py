"""Access counts (MemoryAccess), in one upsert: recall adds one read of what it returns, a merge adds
the merged-away memories' counts to the one that stays.

The counts live in a narrow table of their own, never in the memory's row (see MemoryAccess and
docs/decisions/0009-access-counts-table.md). Added to what the row holds now, not overwritten: a
recall that bumps the memory meanwhile keeps its count. A memory without a row gets one; a memory
deleted meanwhile (the table has no foreign key) gets none.
"""

from datetime import datetime

from django.db import connection
from django.utils import timezone

ADD_ACCESSES_SQL = """
INSERT INTO memories_memoryaccess AS a (memory_id, count, last_accessed_at)
SELECT v.memory_id, v.count, v.last_accessed_at
FROM unnest(%s::bigint[], %s::integer[], %s::timestamptz[]) AS v(memory_id, count, last_accessed_at)
WHERE EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = v.memory_id){asynchronous}
ON CONFLICT (memory_id) DO UPDATE
SET count = a.count + EXCLUDED.count, last_accessed_at = greatest(a.last_accessed_at, EXCLUDED.last_accessed_at)
"""
# Outside a caller's transaction a read's bump commits asynchronously (set_config(..., true) lasts
# until the end of the statement's own transaction): a count lost in a crash does no harm, and
# recall does not wait for the disk before every answer. Inside one it is a plain write, so the
# caller's commit stays synchronous.
ASYNCHRONOUS_COMMIT = " AND set_config('synchronous_commit', 'off', true) IS NOT NULL"


def access_of(memories) -> tuple[int, datetime | None]:
    """The summed access count and the latest access of ``memories`` (Memory objects)."""
    accessed = [m.last_accessed_at for m in memories if m.last_accessed_at]
    return sum(m.access_count for m in memories), max(accessed) if accessed else None


def _upsert(rows: list[tuple[int, int, datetime]], *, asynchronous: bool = False) -> tuple[str, list]:
    """The upsert adding (memory id, count, latest access) rows, and its parameters."""
    sql = ADD_ACCESSES_SQL.format(asynchronous=ASYNCHRONOUS_COMMIT if asynchronous else "")
    return sql, [list(column) for column in zip(*rows, strict=True)]


def add_accesses(added: dict[int, tuple[int, datetime | None]]) -> None:
    """Add (count, latest access) to each memory id's access row; entries that add nothing are skipped."""
    rows = [(pk, count, last) for pk, (count, last) in added.items() if last is not None]
    if rows:
        sql, params = _upsert(rows)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def memories_read(*, ids: list[int], read_sql: str, read_params: list) -> list[tuple]:
    """Record one read, now, of each memory in ``ids`` and return the rows of ``read_sql``, in one statement.

    Recall's access bump: ``read_sql`` is the selector's SELECT of those memories (a data-modifying
    ``WITH`` runs the upsert beside it), so reading and counting the read cost one round trip.
    """
    now = timezone.now()
    upsert, params = _upsert([(pk, 1, now) for pk in ids], asynchronous=not connection.in_atomic_block)
    with connection.cursor() as cursor:
        cursor.execute(f"WITH bump AS ({upsert.strip()}) {read_sql}", [*params, *read_params])
        return cursor.fetchall()
