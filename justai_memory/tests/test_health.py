"""Health per component: database, embedder, cluster heartbeat (503 when one is down), LLM (reported, not fatal)."""

import pytest
from django_q.brokers import get_broker
from django_q.signing import SignedPackage
from django_q.status import Stat, Status

from justai_core.ai_router import provider_status
from transcripts.tests.conftest import memory_role
from transcripts.tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db


@pytest.fixture
def heartbeat(cluster_heartbeat):
    return cluster_heartbeat


@pytest.fixture
def llm(settings):
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url)}
        yield fake


def test_all_components_up_is_200(api, heartbeat, llm):
    response = api.get("/internal/v1/health")
    assert response.status_code == 200, response.json()
    components = response.json()["components"]
    assert response.json()["status"] == "ok"
    assert components["database"] == {"ok": True}
    assert components["embedder"] == {"ok": True, "name": "hash", "dim": 512}
    assert components["cluster"]["ok"] and components["cluster"]["clusters"] == 1
    assert components["llm"]["ok"] and components["llm"]["model_listed"] is True
    assert [r.path for r in llm.requests] == ["/v1/models"]


def test_no_cluster_heartbeat_is_503(api, llm):
    response = api.get("/internal/v1/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["components"]["cluster"] == {
        "ok": False,
        "clusters": 0,
        "error": "no django-q2 cluster heartbeat in the last minute",
    }
    assert body["components"]["database"]["ok"] and body["components"]["embedder"]["ok"]


def test_an_embedder_that_does_not_match_the_database_is_503(api, heartbeat, llm, settings):
    settings.MEMORY_EMBEDDER = "usem3-but-not-loadable"
    response = api.get("/internal/v1/health")
    assert response.status_code == 503
    assert not response.json()["components"]["embedder"]["ok"]


def test_an_unreachable_llm_is_reported_but_not_fatal(api, heartbeat, settings):
    settings.AI_ROLES = {"memory": memory_role("http://127.0.0.1:9/v1")}
    response = api.get("/internal/v1/health")
    assert response.status_code == 200
    llm = response.json()["components"]["llm"]
    assert llm["ok"] is False and llm["error"] == "APIConnectionError"
    assert llm["base_url"] == "http://127.0.0.1:9/v1" and llm["model"] == "fake-model"


def test_the_probe_sends_the_key_but_never_reports_it(settings, monkeypatch):
    monkeypatch.setenv("PROBE_KEY", "sk-very-secret-key")
    with FakeLLM(model="other-model") as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url, api_key_env="PROBE_KEY")}
        status = provider_status("memory")
    assert status["ok"] and status["model_listed"] is False
    assert fake.requests[0].headers["authorization"] == "Bearer sk-very-secret-key"
    assert "secret" not in repr(status)


def test_credentials_in_the_url_are_not_reported(settings):
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url.replace("http://", "http://user:password@"))}
        status, plain_url = provider_status("memory"), fake.base_url
    assert status["ok"] and status["base_url"] == plain_url


def test_a_missing_key_is_a_configuration_error_not_a_crash(settings, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.AI_ROLES = {"memory": {"provider": "openai", "base_url": "", "model": "", "api_key_env": ""}}
    status = provider_status("memory")
    assert status["ok"] is False and "OPENAI_API_KEY" in status["error"]


def test_an_old_heartbeat_does_not_count(api, llm, monkeypatch):
    from datetime import timedelta

    from django.utils import timezone

    status = Status(pid=1, cluster_id="old")
    status.timestamp = timezone.now() - timedelta(minutes=2)
    get_broker().set_stat(Stat.get_key("old"), SignedPackage.dumps(status, True), 3)
    assert api.get("/internal/v1/health").status_code == 503


def test_an_extraction_left_running_by_a_dead_worker_is_reported_not_fatal(api, heartbeat, llm):
    from django.utils import timezone

    from memories.locks import LockId, advisory_lock
    from people.models import Room
    from transcripts.models import Conversation, ExtractionStatus

    room = Room.objects.create(name="Health room")
    now = timezone.now()
    live, dead = (
        Conversation.objects.create(
            room=room, model_location="local", started_at=now, ended_at=now, extraction_status=ExtractionStatus.RUNNING
        )
        for _ in range(2)
    )
    with advisory_lock(LockId.EXTRACTION, key=live.pk) as acquired:  # what a live run holds
        assert acquired
        response = api.get("/internal/v1/health")
    assert response.status_code == 200  # reported, not fatal
    extraction = response.json()["components"]["extraction"]
    assert extraction["ok"] is False and extraction["running"] == 2 and extraction["stalled"] == [dead.pk]
    assert "left running by a worker that died" in extraction["error"]
    Conversation.objects.filter(pk=dead.pk).update(extraction_status=ExtractionStatus.DONE)
    with advisory_lock(LockId.EXTRACTION, key=live.pk):
        extraction = api.get("/internal/v1/health").json()["components"]["extraction"]
    assert extraction == {"ok": True, "running": 1, "stalled": []}


def test_the_report_the_status_page_and_health_give_one_verdict(api, admin_client, heartbeat, settings):
    """/internal/v1/health, /admin/status.json and the status page: the same state and the same reasons."""
    from datetime import timedelta

    from django.utils import timezone

    from people.tests.factories import RoomFactory
    from transcripts.models import ExtractionStatus
    from transcripts.tests.factories import ConversationFactory

    with FakeLLM() as fake:
        dead = fake.base_url
    settings.AI_ROLES = {"memory": memory_role(dead)}
    start = timezone.now() - timedelta(days=2)  # ended before the last day: "nothing learnt" is not a reason
    waiting = ConversationFactory(
        room=RoomFactory(), started_at=start, ended_at=start, extraction_status=ExtractionStatus.WAITING_MODEL
    )
    health = api.get("/internal/v1/health")
    report = admin_client.get("/admin/status.json").json()
    page = admin_client.get("/admin/")
    assert health.status_code == 200 and health.json()["status"] == report["status"] == "attention"
    codes = [reason["code"] for reason in health.json()["reasons"]]
    assert codes == ["llm_down", "conversations_waiting"] and report["reasons"] == health.json()["reasons"]
    assert page.context["status"]["ok"] is False
    assert page.context["status"]["problems"] == [reason["text"] for reason in report["reasons"]]
    assert "Something needs attention" in page.content.decode()

    waiting.delete()
    with FakeLLM() as fake:
        settings.AI_ROLES = {"memory": memory_role(fake.base_url)}
        health, report = api.get("/internal/v1/health").json(), admin_client.get("/admin/status.json").json()
        page = admin_client.get("/admin/")
    assert health["status"] == report["status"] == "ok" and health["reasons"] == report["reasons"] == []
    assert page.context["status"]["ok"] is True and "Healthy" in page.content.decode()


def test_the_embedded_model_is_named_by_its_file_in_health_and_on_the_status_page(
    api, admin_client, heartbeat, settings, tmp_path
):
    model = tmp_path / "household-model.Q4_K_M.gguf"
    model.write_bytes(b"GGUF")
    settings.AI_ROLES = {"memory": {"provider": "embedded"}}
    settings.AI_MEMORY_MODEL_FILE = str(model)
    llm = api.get("/internal/v1/health").json()["components"]["llm"]
    assert llm["model"] == "household-model.Q4_K_M.gguf" and llm["model_source"] == "AI_MEMORY_MODEL_FILE"
    assert "model_listed" not in llm  # the embedded server lists its model under another name: no finding
    assert admin_client.get("/admin/status.json").json()["components"]["llm"]["model"] == llm["model"]
    assert "household-model.Q4_K_M.gguf (AI_MEMORY_MODEL_FILE)" in admin_client.get("/admin/").content.decode()
