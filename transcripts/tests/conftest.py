"""Fixtures of the transcripts tests: the fake LLM wired into the AI router, and running queued jobs."""

import ast

import pytest
from django_q.models import Schedule
from django_q.tasks import async_task

from memories.tests.helpers import run_queued_jobs
from transcripts.tests.fake_llm import FakeLLM
from transcripts.tests.helpers import memory_role


@pytest.fixture
def fake_llm(settings):
    """A fake OpenAI-compatible server that the memory role talks to, with the shipped retries and AI_TIMEOUT.

    A test about retries or the timeout sets its own (``settings.AI_MAX_RETRIES``, ``settings.AI_TIMEOUT``).
    """
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url)}
        yield fake


@pytest.fixture
def run_jobs():
    """Run what the ORM broker holds, as a worker would (until the queue is empty); returns (func, args, result).

    Asserts on the way that every job gets ids only.
    """

    def run(*, include_schedules: bool = False) -> list[tuple[str, tuple, object]]:
        if include_schedules:  # fire due-or-not retry schedules as the scheduler would
            for schedule in Schedule.objects.filter(schedule_type=Schedule.ONCE):
                async_task(schedule.func, *eval_args(schedule.args))
                schedule.delete()
        return run_queued_jobs()

    return run


def eval_args(text: str | None) -> tuple:
    value = ast.literal_eval(text or "()")
    return value if isinstance(value, tuple) else (value,)
