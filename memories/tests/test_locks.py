"""The advisory lock helper: one id per lock, taken once at a time across connections, released on exit."""

import pytest
from django.db import connections, transaction

from memories.locks import LockId, advisory_lock, advisory_lock_free, advisory_xact_lock

pytestmark = pytest.mark.django_db(transaction=True)


def held_elsewhere(lock: LockId, key: int | None = None) -> bool:
    """Whether a second connection finds the lock taken."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            if key is None:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [int(lock)])
            else:
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [int(lock), key])
            taken = cursor.fetchone()[0]
            # Released here, not by close(): the server ends the closed session a moment later, in a race with the test.
            cursor.execute("SELECT pg_advisory_unlock_all()")
        return not taken
    finally:
        other.close()


def test_every_lock_has_its_own_id():
    assert len({int(lock) for lock in LockId}) == len(LockId)


def test_a_lock_is_held_inside_the_block_and_released_after():
    with advisory_lock(LockId.CONSOLIDATION) as acquired:
        assert acquired and held_elsewhere(LockId.CONSOLIDATION)
        assert not held_elsewhere(LockId.PURGE)
    assert not held_elsewhere(LockId.CONSOLIDATION)
    assert advisory_lock_free(LockId.CONSOLIDATION)


def test_a_keyed_lock_holds_only_its_key():
    with advisory_lock(LockId.EXTRACTION, key=42) as acquired:
        assert acquired and held_elsewhere(LockId.EXTRACTION, 42)
        assert not held_elsewhere(LockId.EXTRACTION, 43)
    assert not held_elsewhere(LockId.EXTRACTION, 42)


def test_a_lock_held_elsewhere_is_not_acquired():
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [int(LockId.PURGE)])
        with advisory_lock(LockId.PURGE) as acquired:
            assert not acquired
        assert not advisory_lock_free(LockId.PURGE)

        with transaction.atomic():
            assert not advisory_xact_lock(LockId.PURGE)
    finally:
        other.close()


def test_a_transaction_lock_ends_with_its_transaction():

    with transaction.atomic():
        assert advisory_xact_lock(LockId.REEMBED)
        assert held_elsewhere(LockId.REEMBED)
    assert not held_elsewhere(LockId.REEMBED)
