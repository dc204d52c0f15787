"""The status page tells the truth: what waits or failed, why and what to do; never "healthy" while conversations
wait, the model does not answer, or nothing was learnt for a day while conversations ended."""

from datetime import timedelta

import pytest
from django.utils import timezone, translation

from justai_memory.edge.health import attention_reasons
from people.tests.factories import RoomFactory
from transcripts.models import ExtractionStatus
from transcripts.tests.factories import ConversationFactory
from transcripts.tests.fake_llm import FakeLLM
from transcripts.tests.helpers import memory_role

pytestmark = pytest.mark.django_db

UP = {"ok": True}
COMPONENTS = {"database": UP, "embedder": UP, "cluster": UP, "extraction": UP, "llm": UP}


def ended(status, *, hours_ago=1, **fields):
    now = timezone.now()
    return ConversationFactory(
        room=RoomFactory(),
        started_at=now - timedelta(hours=hours_ago, minutes=5),
        ended_at=now - timedelta(hours=hours_ago),
        extraction_status=status,
        **fields,
    )


@pytest.fixture
def dead_model(settings):
    with FakeLLM() as fake:
        url = fake.base_url
    settings.AI_ROLES = {"memory": memory_role(url)}
    return url


def test_conversations_that_wait_for_the_model_are_listed_with_why_and_what_to_do(admin_client, dead_model):
    reason = f"APIConnectionError from the 'memory' provider: nothing answered at {dead_model}"
    waiting = ended(ExtractionStatus.WAITING_MODEL, extraction_error=reason)
    local = ended(ExtractionStatus.WAITING_LOCAL, hours_ago=2)
    slow = ended(
        ExtractionStatus.FAILED,
        hours_ago=3,
        extraction_attempts=3,
        extraction_error="APITimeoutError from the 'memory' provider: the model was too slow: no token for 180 s",
    )
    page = admin_client.get("/admin/")
    status = page.context["status"]
    html = page.content.decode()
    rows = {row["conversation"].pk: row for row in status["extractions"]}
    assert set(rows) == {waiting.pk, local.pk, slow.pk}
    waiting_advice, local_advice, slow_advice = (rows[c.pk]["advice"] for c in (waiting, local, slow))
    assert "does not answer" in waiting_advice.why and "Start the language model" in waiting_advice.what
    # the stored reason and where the model was looked for, folded away for the operator
    assert reason in waiting_advice.detail and dead_model in waiting_advice.detail
    assert f"<summary>Details for the operator</summary><pre>{reason}" in html.replace("&#x27;", "'")
    assert "runs in the cloud" in local_advice.why and "allow personal memories" in local_advice.what
    assert "took too long" in slow_advice.why and "APITimeoutError" in slow_advice.detail
    assert "faster model" in slow_advice.what and "No attempts are left" in slow_advice.what
    assert "None: every ended conversation has been read." not in html
    # the overall state is not "all fine"
    assert status["ok"] is False and "Something needs attention" in html and "Healthy" not in html
    assert "The language model does not answer, so no conversation can be read." in status["problems"]
    assert "2 ended conversations wait to be read." in status["problems"]
    assert "1 conversation could not be read." in status["problems"]
    assert "1 conversation waits for it" in html
    # the extraction chart has a waiting series
    totals = {name: total for _c, name, total in status["charts"][2].legend}
    assert totals["waiting for the model to answer"] == 1 and totals["waiting for a local model"] == 1
    german = admin_client.get("/admin/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "2 beendete Gespräche warten darauf, gelesen zu werden." in german


@translation.override("en")
def problems(components):
    return [reason["text"] for reason in attention_reasons(components)]


def test_all_fine_only_when_nothing_waits_and_something_was_learnt():
    assert problems(COMPONENTS) == []
    ended(ExtractionStatus.SKIPPED)  # too short to read: nothing to learn from it
    assert problems(COMPONENTS) == []
    nothing = ended(ExtractionStatus.DONE, extracted_at=timezone.now(), extraction_stats={"memory_ids": []})
    assert problems(COMPONENTS) == ["Nothing was learnt in the last 24 hours, although 1 conversation ended."]
    ended(ExtractionStatus.DONE, extracted_at=timezone.now(), extraction_stats={"memory_ids": [7]})
    assert problems(COMPONENTS) == []
    nothing.delete()
    ended(ExtractionStatus.QUEUED, hours_ago=0)  # just ended: its job runs shortly
    assert problems(COMPONENTS) == []
    ended(ExtractionStatus.QUEUED, hours_ago=2)  # its job got lost
    assert problems(COMPONENTS) == ["1 ended conversation waits to be read."]
    down = {**COMPONENTS, "llm": {"ok": False}, "cluster": {"ok": False}}
    assert problems(down)[:2] == [
        "A required part does not work: the job cluster.",
        "The language model does not answer, so no conversation can be read.",
    ]


def test_the_embedded_model_shows_its_file_name(admin_client, settings, tmp_path):
    model = tmp_path / "household-model.Q4_K_M.gguf"
    model.write_bytes(b"GGUF")
    settings.AI_ROLES = {"memory": {"provider": "embedded"}}
    settings.AI_MEMORY_MODEL_FILE = str(model)
    settings.DATA_DIR = tmp_path
    page = admin_client.get("/admin/")
    html = page.content.decode()
    assert page.context["status"]["model_file"] == "household-model.Q4_K_M.gguf (AI_MEMORY_MODEL_FILE)"
    assert "household-model.Q4_K_M.gguf (AI_MEMORY_MODEL_FILE)" in html
    assert "not among the provider&#x27;s models" not in html and "not among the provider's models" not in html
    settings.AI_MEMORY_MODEL_FILE = ""
    bundled = admin_client.get("/admin/").context["status"]["model_file"]
    assert bundled == "SmolLM2-135M-Instruct.Q4_1.gguf (bundled)"
