"""The supervisor's restart policy: backoff doubling to a cap, reset after a long run; a budget of restarts per window."""

import pytest

from justai_memory.serving import children
from justai_memory.serving.children import GiveUp, Restarts


@pytest.fixture
def clock(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(children.time, "monotonic", lambda: now[0])
    return now


def test_quick_failures_back_off_doubling_then_give_up_over_the_budget(clock):
    restarts = Restarts("web", limit=4, window=600)
    delays = []
    for _ in range(4):
        restarts.started()
        clock[0] += 2
        restarts.failed("exited with code 1")
        delays.append(restarts.restart_at - clock[0])
        assert not restarts.due()
        clock[0] = restarts.restart_at
        assert restarts.due()
    assert delays == [1, 2, 4, 8]
    restarts.started()
    with pytest.raises(GiveUp, match="web exited with code 1; it failed 5 times within 600 s, giving up"):
        restarts.failed("exited with code 1")


def test_the_budget_is_a_rate_failures_older_than_the_window_do_not_count(clock):
    restarts = Restarts("database", limit=4, window=600)
    for _ in range(40):  # a crash every 200 s: at most 3 within any 600 s
        restarts.started()
        clock[0] += 200
        restarts.failed("postmaster is gone")
    assert len(restarts.failures) == 3


def test_the_default_budget_survives_four_crashes_10_s_apart(clock):
    restarts = Restarts("database")
    for _ in range(4):
        restarts.started()
        clock[0] += 10
        restarts.failed("postmaster is gone")
    assert restarts.restart_at is not None and len(restarts.failures) == 4


def test_a_child_that_ran_a_minute_starts_its_backoff_over(clock):
    restarts = Restarts("cluster")
    for _ in range(3):
        restarts.started()
        restarts.failed("exited with code -9")
    restarts.started()
    clock[0] += children.QUICK_SECONDS
    restarts.failed("exited with code -9")
    assert restarts.restart_at == clock[0] + children.BACKOFF_FIRST


def test_the_backoff_is_capped(clock):
    restarts = Restarts("database")
    restarts.backoff = children.BACKOFF_MAX
    restarts.started()
    restarts.failed("postmaster is gone")
    assert restarts.backoff == children.BACKOFF_MAX
