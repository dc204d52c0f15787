"""Helpers the tests of every app share (fixtures stay in the conftest files; these are plain functions)."""

import numpy as np
import pytest
from django.utils.module_loading import import_string
from django_q.models import OrmQ


def one_hot(index: int, dim: int = 512) -> np.ndarray:
    """A tiny deterministic unit vector for tests that need exact similarities."""
    vector = np.zeros(dim, dtype=np.float32)
    vector[index] = 1.0
    return vector


def queued_tasks() -> list[dict]:
    """The task packages waiting in the ORM broker's queue, oldest first."""
    return [item.task for item in OrmQ.objects.order_by("pk")]


def run_queued_jobs(*, limit: int = 100) -> list[tuple[str, tuple, object]]:
    """Run what the ORM broker holds, as a worker would, until the queue is empty; (func, args, result) each.

    Asserts on the way that every job gets ids only, as positional arguments.
    """
    done = []
    for _ in range(limit):
        item = OrmQ.objects.order_by("pk").first()
        if item is None:
            return done
        task = item.task
        item.delete()
        assert all(isinstance(arg, int) for arg in task.get("args", ())), task.get("args")
        assert not task.get("kwargs"), "jobs take ids as positional arguments only"
        done.append((task["func"], tuple(task["args"]), import_string(task["func"])(*task["args"])))
    raise AssertionError("the queue does not run dry")


def fails_with(request, embedder, *names: str, reason: str) -> None:
    """Expect this run to fail when ``embedder`` is one of ``names``: a known limit of a shipped embedder, said in
    ``reason``. Strict: once it passes, the run fails, and the mark goes with the limit."""
    if embedder.name in names:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
