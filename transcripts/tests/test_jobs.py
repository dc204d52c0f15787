"""The job entry points behind the stored dotted paths."""

import pytest
from django.utils.module_loading import import_string

from justai_memory.schedules import SCHEDULES
from transcripts.selectors import EXTRACT_JOB

pytestmark = pytest.mark.django_db


def test_every_transcripts_path_in_schedules_and_queues_imports():
    paths = [spec.func for spec in SCHEDULES if spec.func.startswith("transcripts.")] + [EXTRACT_JOB]
    assert sorted(paths) == [
        "transcripts.jobs.conversation_extract_job",
        "transcripts.jobs.conversations_extract_resume_job",
        "transcripts.jobs.conversations_extract_sweep_job",
        "transcripts.jobs.transcripts_purge_job",
    ]
    for path in paths:
        assert callable(import_string(path))


def test_the_sweep_job_reports_counts(fake_llm):
    assert import_string("transcripts.jobs.conversations_extract_sweep_job")() == {
        "ended_idle": 0,
        "requeued": 0,
        "resumed": 0,
    }


def test_the_extract_job_says_when_the_conversation_is_gone(fake_llm):
    assert import_string(EXTRACT_JOB)(424242) == "gone"
