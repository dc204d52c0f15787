"""Access counts (MemoryAccess), in one upsert: recall adds one read of what it returns, a merge adds
the merged-away memories' counts to the one that stays. And the day's recall count (RecallDay), which
recall adds one to in the same statement.

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
WHERE EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = v.memory_id)
ON CONFLICT (memory_id) DO UPDATE
SET count = a.count + EXCLUDED.count, last_accessed_at = greatest(a.last_accessed_at, EXCLUDED.last_accessed_at)
"""
# One more recall on ``day`` (a date and a count: no text, no speaker).
COUNT_RECALL_SQL = """
INSERT INTO memories_recallday AS d (day, count)
SELECT %s::date, 1{asynchronous}
ON CONFLICT (day) DO UPDATE SET count = d.count + 1
"""
# Outside a caller's transaction a read's bump commits asynchronously (set_config(..., true) lasts
# until the end of the statement's own transaction; the day's count evaluates it exactly once, also
# for a recall that found nothing): a count lost in a crash does no harm, and recall does not wait
# for the disk before every answer. Inside one it is a plain write, so the caller's commit stays
# synchronous.
ASYNCHRONOUS_COMMIT = " WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL"


def access_of(memories) -> tuple[int, datetime | None]:
    """The summed access count and the latest access of ``memories`` (Memory objects)."""
    accessed = [m.last_accessed_at for m in memories if m.last_accessed_at]
    return sum(m.access_count for m in memories), max(accessed) if accessed else None


def _upsert(rows: list[tuple[int, int, datetime]]) -> tuple[str, list]:
    """The upsert adding (memory id, count, latest access) rows, and its parameters (three arrays).

    In ascending memory id: two recalls that bump the same memories then lock their rows in the same
    order, and cannot deadlock on each other (one waits for the other instead).
    """
    return ADD_ACCESSES_SQL, [list(column) for column in zip(*sorted(rows), strict=True)] or [[], [], []]


def add_accesses(added: dict[int, tuple[int, datetime | None]]) -> None:
    """Add (count, latest access) to each memory id's access row; entries that add nothing are skipped."""
    rows = [(pk, count, last) for pk, (count, last) in added.items() if last is not None]
    if rows:
        sql, params = _upsert(rows)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)


def recall_record(*, ids: list[int], read_sql: str, read_params: list) -> list[tuple]:
    """Write one recall, now, and one access of each memory in ``ids``; return the rows of ``read_sql``; one statement.

    Recall's access bump: ``read_sql`` is the recall selector's SELECT of those memories (data-modifying
    ``WITH`` queries run the upsert and the day's count beside it), so reading and counting cost one
    round trip. ``ids`` may be empty (a recall that found nothing still counts as a recall). The
    day is the household's (TIME_ZONE), whatever time zone a request has activated.
    """
    now = timezone.now()
    upsert, params = _upsert([(pk, 1, now) for pk in ids])
    count = COUNT_RECALL_SQL.format(asynchronous="" if connection.in_atomic_block else ASYNCHRONOUS_COMMIT)
    day = timezone.localdate(now, timezone.get_default_timezone())
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH bump AS ({upsert.strip()}), recall AS ({count.strip()}) {read_sql}",
            [*params, day, *read_params],
        )
        return cursor.fetchall()
