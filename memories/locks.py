"""PostgreSQL advisory locks: every lock id of the project in one registry, and the two ways to take one.

Session-level locks (``advisory_lock``) are held until released or until the connection ends, so a
process that dies releases them. Transaction-level ones (``advisory_xact_lock``) end with the
transaction. Ids are unique across the project: a new lock gets a new member here.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

from django.db import DatabaseError, connection

logger = logging.getLogger(__name__)


class LockId(IntEnum):
    REEMBED = 7_311_001  # one re-embedding at a time
    CONSOLIDATION = 7_311_002  # one consolidation run at a time
    PURGE = 7_311_003  # one transcripts purge at a time
    EXTRACTION = 7_311_004  # with a conversation id: one extraction run per conversation
    MEMORY_STORE = 7_311_005  # with a duplicate-scope key: stores into one scope/owner/room one at a time


def _key(lock: LockId, key: int | None) -> tuple[str, list[int]]:
    if key is None:
        return "%s", [int(lock)]
    # The two-key form takes two int4: the second key is the id's low 31 bits.
    return "%s, %s", [int(lock), key & 0x7FFFFFFF]


@contextmanager
def advisory_lock(lock: LockId, *, key: int | None = None) -> Iterator[bool]:
    """Try the session-level lock ``lock`` (with ``key``: the pair); yield whether it was taken; release it on exit."""
    placeholders, params = _key(lock, key)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory_lock({placeholders})", params)
        acquired = cursor.fetchone()[0]
    try:
        yield acquired
    finally:
        if acquired:
            try:
                with connection.cursor() as cursor:
                    cursor.execute(f"SELECT pg_advisory_unlock({placeholders})", params)
            except DatabaseError:
                # A broken connection has released its session locks already.
                logger.warning("could not release advisory lock %s; the connection is gone", lock.name)


def advisory_xact_lock(lock: LockId, *, key: int | None = None) -> bool:
    """Try the transaction-level lock ``lock`` in the current transaction; True when it was taken."""
    placeholders, params = _key(lock, key)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory_xact_lock({placeholders})", params)
        return cursor.fetchone()[0]


def advisory_lock_free(lock: LockId, *, key: int | None = None) -> bool:
    """Whether nobody holds ``lock`` right now (taken and released at once; a hint, the holder may change)."""
    with advisory_lock(lock, key=key) as acquired:
        return acquired


def advisory_locks_held(lock: LockId, *, keys) -> set[int]:
    """Which of the (``lock``, key) pairs some session holds right now, read from pg_locks without taking any."""
    keys = sorted({key & 0x7FFFFFFF for key in keys})
    if not keys:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(  # the two-key form: classid and objid are the keys, objsubid is 2
            "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND classid = %s::bigint::oid AND objid = ANY(%s::bigint[]::oid[])",
            [int(lock), keys],
        )
        return {row[0] for row in cursor.fetchall()}


def advisory_xact_locks_wait(lock: LockId, *, keys) -> None:
    """Wait for the transaction-level locks (``lock``, key) for every key, taken in key order (so two callers
    with overlapping keys cannot deadlock on them); they end with the current transaction."""
    keys = sorted({key & 0x7FFFFFFF for key in keys})
    if keys:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, k) FROM unnest(%s::int[]) AS k ORDER BY k", [int(lock), keys]
            )
