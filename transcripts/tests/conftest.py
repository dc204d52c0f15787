"""Fixtures of the transcripts tests: the fake LLM wired into the AI router, and running queued jobs."""

import ast

import pytest
from django.utils.module_loading import import_string
from django_q.models import OrmQ, Schedule
from django_q.tasks import async_task

from transcripts.tests.fake_llm import FakeLLM


def memory_role(base_url: str, **overrides) -> dict:
    return {
        "provider": "custom",
        "base_url": base_url,
        "model": "fake-model",
        "api_key_env": "",
        "location": "local",
        "response_format": "json_schema",
        **overrides,
    }


@pytest.fixture
def fake_llm(settings):
    """A fake OpenAI-compatible server that the memory role talks to (local, no retries by the SDK)."""
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url)}
        settings.AI_MAX_RETRIES = 0
        settings.AI_TIMEOUT = 10.0
        yield fake


def queued_tasks() -> list[dict]:
    """The task packages waiting in the ORM broker's queue."""
    return [item.task for item in OrmQ.objects.order_by("pk")]


@pytest.fixture
def run_jobs():
    """Run what the ORM broker holds, as a worker would (until the queue is empty); returns (func, args, result).

    Asserts on the way that every job gets ids only.
    """

    def run(*, include_schedules: bool = False) -> list[tuple[str, tuple, object]]:
        done = []
        if include_schedules:  # fire due-or-not retry schedules as the scheduler would
            for schedule in Schedule.objects.filter(schedule_type=Schedule.ONCE):
                async_task(schedule.func, *eval_args(schedule.args))
                schedule.delete()
        for _ in range(100):
            item = OrmQ.objects.order_by("pk").first()
            if item is None:
                return done
            task = item.task
            item.delete()
            assert all(isinstance(arg, int) for arg in task.get("args", ())), task.get("args")
            assert not task.get("kwargs"), "jobs take ids as positional arguments only"
            result = import_string(task["func"])(*task["args"])
            done.append((task["func"], tuple(task["args"]), result))
        raise AssertionError("the queue does not run dry")

    return run


def eval_args(text: str | None) -> tuple:
    value = ast.literal_eval(text or "()")
    return value if isinstance(value, tuple) else (value,)
