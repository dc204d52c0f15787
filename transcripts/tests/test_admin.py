"""The conversations admin: read-only turns, extraction status and stats, the re-run action."""

import re
import socket
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.html import escape
from django_q.models import OrmQ

from people.tests.factories import PersonFactory
from transcripts.admin.extraction import stats_text
from transcripts.models import Conversation
from transcripts.selectors import EXTRACT_JOB
from transcripts.services.extraction.run import conversation_extract
from transcripts.tests.conftest import memory_role
from transcripts.tests.factories import ConversationFactory, TurnFactory
from transcripts.tests.fake_llm import extraction_answer

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:transcripts_conversation_changelist")


def change_url(conversation):
    return reverse("admin:transcripts_conversation_change", args=[conversation.pk])


def ended_conversation(**fields):
    now = timezone.now()
    return ConversationFactory(started_at=now - timedelta(minutes=5), ended_at=now, **fields)


def queued_tasks() -> list[tuple[str, tuple]]:
    return [(q.task["func"], tuple(q.task["args"])) for q in OrmQ.objects.order_by("id")]


def test_the_list_shows_turns_extraction_status_and_stats(admin_client):
    conversation = ended_conversation(
        speaker=None,
        extraction_status="done",
        extraction_stats={"stored": 3, "skipped_forgotten": 1, "model": "local"},
    )
    TurnFactory.create_batch(2, conversation=conversation)
    response = admin_client.get(CHANGELIST)
    html = response.content.decode()
    assert response.status_code == 200
    assert "left out (forgotten) 1, stored 3" in html and "unknown" in html
    assert response.context["cl"].result_list[0].turn_count == 2


def test_the_filters_narrow_the_list(admin_client):
    open_one = ConversationFactory()
    ended = ended_conversation(extraction_status="failed", model_location="cloud")
    assert [c.pk for c in admin_client.get(CHANGELIST, {"ended": "no"}).context["cl"].result_list] == [open_one.pk]
    for query in ({"ended": "yes"}, {"extraction_status__exact": "failed"}, {"model_location__exact": "cloud"}):
        assert [c.pk for c in admin_client.get(CHANGELIST, query).context["cl"].result_list] == [ended.pk]


def test_the_turns_are_shown_read_only_and_the_conversation_cannot_be_edited(admin_client):
    anna = PersonFactory(name="Anna")
    conversation = ended_conversation(speaker=anna, extraction_stats={"stored": 2})
    TurnFactory(conversation=conversation, text="Merk dir: der Code ist 4711", speaker=anna)
    response = admin_client.get(change_url(conversation))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Merk dir: der Code ist 4711" in html and "&quot;stored&quot;: 2" in html
    assert 'name="turns-0-text"' not in html  # no input for a turn's text
    assert not response.context["has_change_permission"]
    response = admin_client.post(change_url(conversation), {"language": "it"})
    assert response.status_code == 403
    conversation.refresh_from_db()
    assert conversation.language == "de"


def test_rerun_resets_and_queues_allowed_conversations_and_says_why_not_for_the_others(
    admin_client, django_capture_on_commit_callbacks
):
    failed = ended_conversation(extraction_status="failed", extraction_attempts=3, extraction_error="gave up")
    done = ended_conversation(extraction_status="done", extraction_attempts=1)
    still_open = ConversationFactory()
    blocked = ended_conversation(extraction_blocked=True, extraction_status="blocked")
    waiting = ended_conversation(extraction_status="waiting_local")
    data = {
        "action": "rerun_extraction",
        "_selected_action": [c.pk for c in (failed, done, still_open, blocked, waiting)],
    }

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(CHANGELIST, data, follow=True)

    assert queued_tasks() == [(EXTRACT_JOB, (failed.pk,)), (EXTRACT_JOB, (done.pk,))]
    assert {t.task["name"] for t in OrmQ.objects.all()} == {f"memory.extract:{failed.pk}", f"memory.extract:{done.pk}"}
    failed.refresh_from_db()
    assert (failed.extraction_status, failed.extraction_attempts, failed.extraction_error) == ("queued", 0, "")
    html = response.content.decode()
    # each conversation by who and when, not by its id
    assert f"Queued extraction for 2 conversations: {failed}; {done}" in html
    assert f"still open: it is extracted once it has ended: {still_open}" in html
    assert f"speaker deleted: never extracted (it would become shared memories): {blocked}" in html
    assert "waiting for a local model" in html and "AI_MEMORY_*" in html and str(waiting) in html


def test_a_staff_user_without_the_change_permission_cannot_rerun_extraction(
    client, django_user_model, django_capture_on_commit_callbacks
):
    user = django_user_model.objects.create_user(username="viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_conversation"))
    client.force_login(user)
    conversation = ended_conversation()
    assert "rerun_extraction" not in client.get(CHANGELIST).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(CHANGELIST, {"action": "rerun_extraction", "_selected_action": [conversation.pk]})
    assert not OrmQ.objects.exists()


def test_conversations_are_not_added_by_hand(admin_client):
    assert admin_client.get(reverse("admin:transcripts_conversation_add")).status_code == 403
    assert not Conversation.objects.exists()


def test_a_conversation_whose_llm_did_not_answer_shows_the_url_and_what_to_set(admin_client, settings):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.AI_ROLES = {"memory": memory_role(f"http://user:secret@127.0.0.1:{port}/v1?key=secret")}  # default retries
    conversation = ended_conversation(extraction_status="queued")
    TurnFactory(conversation=conversation, role="user", text="Der Code für das Gartentor ist 4711.")
    conversation_extract(conversation_id=conversation.pk)
    conversation.refresh_from_db()
    url = f"http://127.0.0.1:{port}/v1"
    assert conversation.extraction_status == "waiting_model"
    assert conversation.extraction_error == f"APIConnectionError from the 'memory' provider: nothing answered at {url}"
    html = admin_client.get(change_url(conversation)).content.decode()
    assert f"nothing answered at {url} (provider &#x27;custom&#x27;, model &#x27;fake-model&#x27;)" in html
    assert "AI_MEMORY_PROVIDER" in html and "AI_MEMORY_BASE_URL" in html and "secret" not in html


def test_no_hint_when_the_llm_answered(admin_client):
    conversation = ended_conversation(extraction_status="failed", extraction_error="answer is not JSON")
    assert "AI_MEMORY_BASE_URL" not in admin_client.get(change_url(conversation)).content.decode()


@pytest.mark.parametrize("language", ["de", "it"])
def test_every_count_an_extraction_writes_is_named_in_the_admin_s_language(admin_client, fake_llm, language):
    """The stats' keys are data (English, stable); what the list and the conversation page show of them are words."""
    conversation = ended_conversation(speaker=None, extraction_status="queued")
    TurnFactory(conversation=conversation, role="user", text="Im Bad ist das Licht kaputt, das Licht im Bad.")
    same = {"content": "Im Bad ist das Licht kaputt.", "scope": "room"}
    fake_llm.reply(extraction_answer(facts=[same, same], summary="Jemand sprach über das Licht im Bad."))
    conversation_extract(conversation_id=conversation.pk)
    conversation.refresh_from_db()
    counts = {key for key, value in conversation.extraction_stats.items() if isinstance(value, int)}
    assert {"repeats", "ungrounded", "created", "user_chars"} <= counts
    with translation.override(language):
        words = stats_text(conversation.extraction_stats)
    assert not counts & set(re.findall(r"[a-z_]+", words)), words  # no key left as it is stored
    for page in (CHANGELIST, change_url(conversation)):
        assert escape(words) in admin_client.get(page, HTTP_ACCEPT_LANGUAGE=language).content.decode(), page
