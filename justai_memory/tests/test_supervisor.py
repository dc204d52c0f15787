"""The supervisor's restart policy: backoff doubling to a cap, reset after a long run, give up after quick failures."""

import pytest

from justai_memory import supervisor
from justai_memory.supervisor import GiveUp, Restarts


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(supervisor.time, "monotonic", lambda: now[0])
    return now


def test_quick_failures_back_off_doubling_then_give_up(clock):
    restarts = Restarts("web")
    delays = []
    for _ in range(supervisor.MAX_QUICK_FAILURES - 1):
        restarts.started()
        clock[0] += 2
        restarts.failed("exited with code 1")
        delays.append(restarts.restart_at - clock[0])
        assert not restarts.due()
        clock[0] = restarts.restart_at
        assert restarts.due()
    assert delays == [1, 2, 4, 8]
    restarts.started()
    with pytest.raises(GiveUp, match="web exited with code 1; it failed 5 times in a row"):
        restarts.failed("exited with code 1")


def test_a_child_that_ran_a_minute_starts_over(clock):
    restarts = Restarts("cluster")
    for _ in range(3):
        restarts.started()
        restarts.failed("exited with code -9")
    restarts.started()
    clock[0] += supervisor.QUICK_SECONDS
    restarts.failed("exited with code -9")
    assert restarts.quick_failures == 1 and restarts.restart_at == clock[0] + supervisor.BACKOFF_FIRST


def test_the_backoff_is_capped(clock):
    restarts = Restarts("database")
    restarts.backoff = supervisor.BACKOFF_MAX
    restarts.started()
    restarts.failed("postmaster is gone")
    assert restarts.backoff == supervisor.BACKOFF_MAX
