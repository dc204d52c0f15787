"""The admin pages that call the other apps' services: recall preview, consolidation, extraction."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.models import OrmQ

from justai_core.errors import ApplicationError
from memories.models import AuditEvent, ConsolidationRun, Memory, MemoryAccess, Scope
from memories.tests.factories import MemoryFactory
from memories.tests.helpers import run_queued_jobs
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db

PREVIEW = reverse("admin:memories_memory_recall_preview")
RUN = reverse("admin:memories_consolidationrun_run")


@pytest.fixture
def household():
    anna, kitchen = PersonFactory(name="Anna"), RoomFactory(name="Kitchen")
    return {
        "anna": anna,
        "kitchen": kitchen,
        "shared": MemoryFactory(content="The spare key for the cellar is in the blue tin"),
        "private": MemoryFactory(
            content="Anna keeps her spare key in the blue tin too", scope=Scope.PRIVATE, owner=anna
        ),
        "room": MemoryFactory(content="The kitchen key is in the blue tin", scope=Scope.ROOM, room=kitchen),
    }


def preview(admin_client, *, query, room, speaker=None, conversation=None, model_location="local"):
    params = {
        "query": query,
        "room": room.pk,
        "speaker": speaker.pk if speaker else "",
        "limit": 10,
        "model_location": model_location,
    }
    if conversation is not None:
        params["conversation"] = conversation.pk
    response = admin_client.get(PREVIEW, params)
    assert response.status_code == 200
    return response


# --- recall preview: the API's code path ---------------------------------------------------------


def test_the_preview_shows_exactly_what_the_api_returns(admin_client, api, household):
    response = preview(admin_client, query="blue tin key", room=household["kitchen"], speaker=household["anna"])
    rows = response.context["rows"]
    api_answer = api.post(
        "/internal/v1/recall",
        {
            "query": "blue tin key",
            "room_id": household["kitchen"].pk,
            "speaker_id": household["anna"].pk,
            "limit": 10,
            "model_location": "local",
        },
    ).json()
    assert [row.id for row in rows] == [m["id"] for m in api_answer["memories"]]
    assert household["private"].pk in [row.id for row in rows]
    assert response.context["result"].prompt == api_answer["prompt"]
    assert "blue tin" in response.content.decode()


def test_the_preview_says_which_paths_found_each_memory(admin_client, household):
    response = preview(admin_client, query="blue tin key", room=household["kitchen"], speaker=household["anna"])
    first = response.context["rows"][0]
    assert first.found_by["vector"].rank == 1
    html = response.content.decode()
    assert f"vector #1 ({first.found_by['vector'].score:.3f})" in html
    # Anna speaks German, the memories are English: their words matched as typed, in another language.
    assert "keyword_other_language #" in html


def test_an_unknown_speaker_does_not_see_private_memories_in_the_preview(admin_client, household):
    response = preview(admin_client, query="blue tin key", room=household["kitchen"])
    ids = [row.id for row in response.context["rows"]]
    assert household["shared"].pk in ids and household["room"].pk in ids
    assert household["private"].pk not in ids


def test_the_preview_lists_in_rank_order_and_says_its_similarity_column_is_not_that_order(admin_client, household):
    response = preview(admin_client, query="blue tin key", room=household["kitchen"], speaker=household["anna"])
    html = response.content.decode()
    assert 'id="recall-order-explained"' in html and "similarity" in html.split("<thead>")[1].split("</thead>")[0]
    assert ">score<" not in html
    ranks = [cell.split("</td>")[0] for cell in html.split("<tbody>")[1].split("<tr>")[1:]]
    assert [r.strip().removeprefix("<td>") for r in ranks] == [str(n) for n in range(1, len(ranks) + 1)]


def test_the_preview_changes_nothing(admin_client, household):
    events = AuditEvent.objects.count()
    response = preview(admin_client, query="blue tin key", room=household["kitchen"], speaker=household["anna"])
    assert response.context["rows"]
    assert not MemoryAccess.objects.exists()
    assert AuditEvent.objects.count() == events


def test_the_preview_shows_when_memories_are_withheld_from_a_cloud_model(admin_client, household):
    conversation = ConversationFactory(room=household["kitchen"], model_location="cloud")
    response = preview(admin_client, query="blue tin key", room=household["kitchen"], conversation=conversation)
    assert response.context["result"].withheld and response.context["rows"] == []
    html = response.content.decode()
    assert 'id="recall-withheld">Memories withheld' in html and "Withheld: " not in html  # said once
    # Without a conversation the admin says where the model runs; cloud is withheld the same way.
    response = preview(admin_client, query="blue tin key", room=household["kitchen"], model_location="cloud")
    assert response.context["result"].withheld and response.context["rows"] == []


def test_the_preview_shows_working_memory_only_to_who_may_view_conversations(client, household, django_user_model):
    conversation = ConversationFactory(room=household["kitchen"])
    TurnFactory(conversation=conversation, text="Mein Passwort ist Zebra 98765")
    user = django_user_model.objects.create_user("memory-viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_memory"))
    client.force_login(user)
    response = preview(client, query="blue tin key", room=household["kitchen"], conversation=conversation)
    assert response.context["rows"]  # the memories, as before
    assert "98765" not in response.content.decode() and response.context["working_memory"] == []
    assert 'id="recall-working-memory-hidden"' in response.content.decode()

    user.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    user = django_user_model.objects.get(pk=user.pk)  # permissions are cached per user object
    client.force_login(user)
    response = preview(client, query="blue tin key", room=household["kitchen"], conversation=conversation)
    assert "98765" in response.content.decode() and len(response.context["working_memory"]) == 1


def test_the_preview_refuses_a_conversation_of_another_room(admin_client, household):
    conversation = ConversationFactory()
    response = preview(admin_client, query="blue tin key", room=household["kitchen"], conversation=conversation)
    assert response.context["result"] is None and "another room" in response.content.decode()


# --- consolidation: the button --------------------------------------------------------------------


def test_run_consolidation_now_queues_the_job_and_links_its_run(
    admin_client, admin_user, django_capture_on_commit_callbacks
):
    MemoryFactory(content="The gate code is 4711")
    MemoryFactory(content="The gate code is 4711")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(RUN, {"dry_run": "0"}, follow=True)
    run = ConsolidationRun.objects.get()
    assert (run.started_by, run.dry_run, run.status) == (f"admin:{admin_user.pk}", False, "queued")
    assert Memory.objects.count() == 2  # nothing ran inside the request
    html = response.content.decode()
    assert reverse("admin:memories_consolidationrun_change", args=[run.pk]) in html and "is queued" in html
    assert OrmQ.objects.get().task["func"] == "memories.jobs.memories_consolidate_job"

    assert [result for _, _, result in run_queued_jobs()] == [run.pk]
    run.refresh_from_db()
    assert (run.status, run.merged) == ("done", 1) and Memory.objects.count() == 1
    page = admin_client.get(reverse("admin:memories_consolidationrun_change", args=[run.pk])).content.decode()
    assert f"admin:{admin_user.pk}" in page


def test_the_dry_run_button_queues_a_dry_run_that_changes_no_memory(admin_client, django_capture_on_commit_callbacks):
    MemoryFactory(content="The gate code is 4711")
    MemoryFactory(content="The gate code is 4711")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(RUN, {"dry_run": "1"}, follow=True)
    run = ConsolidationRun.objects.get()
    assert "Dry run" in response.content.decode()
    run_queued_jobs()
    run.refresh_from_db()
    assert (run.dry_run, run.status, run.merged) == (True, "done", 1) and Memory.objects.count() == 2


def test_a_run_while_another_is_going_shows_the_error(admin_client, monkeypatch):
    # Presentation only: the service's own tests hold the lock from a second connection.
    def already_running(**kwargs):
        raise ApplicationError("A consolidation run is already going.")

    monkeypatch.setattr("memories.admin.consolidation.memories_consolidate_queue", already_running)
    response = admin_client.post(RUN, {"dry_run": "0"}, follow=True)
    messages = [(m.level_tag, m.message) for m in response.context["messages"]]
    assert messages == [("error", "A consolidation run is already going.")]
    assert not ConsolidationRun.objects.exists()


# --- extraction: the re-run action queues a job that exists ---------------------------------------


def test_the_queued_re_run_is_the_real_extraction_job(admin_client, django_capture_on_commit_callbacks):
    now = timezone.now()
    conversation = ConversationFactory(started_at=now - timedelta(minutes=2), ended_at=now, extraction_status="failed")
    TurnFactory(conversation=conversation, text="Hallo")  # under 15 characters: skipped, no LLM needed
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            reverse("admin:transcripts_conversation_changelist"),
            {"action": "rerun_extraction", "_selected_action": [conversation.pk]},
        )
    task = OrmQ.objects.get().task
    import_string(task["func"])(*task["args"])
    conversation.refresh_from_db()
    assert conversation.extraction_status == "skipped"
