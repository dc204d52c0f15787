"""The admin's smaller details (issue 38): a future time reads "in ...", "never extract" only where it holds,
refusals in the page's language, the recall preview says what it changes, what the API was told shows who told it,
the forget-block list fits its box."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone, translation

from memories.admin.base import when
from memories.models import Memory
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db
GERMAN = {"HTTP_ACCEPT_LANGUAGE": "de-DE,de;q=0.9"}


def test_a_time_in_the_future_reads_in_so_long_not_ago():
    with translation.override("en"):
        assert when(timezone.now() + timedelta(minutes=4, seconds=30)).endswith("(in 4\xa0minutes)")
        assert when(timezone.now() - timedelta(hours=2, minutes=1)).endswith("(2\xa0hours ago)")
    with translation.override("de"):
        assert when(timezone.now() + timedelta(minutes=4, seconds=30)).endswith("(in 4\xa0Minuten)")


def test_never_extract_shows_only_where_it_holds_and_a_refused_rerun_speaks_german(admin_client):
    kitchen = RoomFactory()
    open_one = ConversationFactory(room=kitchen)
    page = admin_client.get(reverse("admin:transcripts_conversation_change", args=[open_one.pk]), **GERMAN)
    html = page.content.decode()
    field = html[html.index("field-never_extract") :][:400]
    assert "icon-no" not in field and "Nein" in field and "gelöscht" not in field
    rerun = admin_client.post(
        reverse("admin:transcripts_conversation_changelist"),
        {"action": "rerun_extraction", "_selected_action": [open_one.pk]},
        follow=True,
        **GERMAN,
    )
    messages = [str(m) for m in rerun.context["messages"]]
    with translation.override("de"):
        named = str(open_one)  # the conversation by who and when, not by its id
    assert named.startswith("Gespräch mit einer unbekannten Person, ")
    assert messages == [f"Nicht eingereiht, noch offen: Es wird ausgewertet, sobald es beendet ist: {named}."]


def test_the_recall_preview_says_it_changes_nothing_and_what_its_limit_counts(admin_client):
    html = admin_client.get(reverse("admin:memories_memory_recall_preview"), **GERMAN).content.decode()
    assert "bleiben unverändert" in html and "zurückgesetzt" not in html
    assert "bis zu 3 Erinnerungen über einen bekannten Sprecher kommen hinzu" in html


def test_a_memory_remembered_through_the_api_says_who_told_it(admin_client, api):
    julia, kitchen = PersonFactory(name="Julia"), RoomFactory(name="Küche")
    told = api.post(
        "/internal/v1/memories/remember",
        {
            "content": "Der Hausschlüssel hängt am Haken.",
            "room_id": kitchen.pk,
            "speaker_id": julia.pk,
            "scope": "room",
        },
    )
    memory = Memory.objects.get(pk=told.json()["id"])
    html = admin_client.get(reverse("admin:memories_memory_change", args=[memory.pk])).content.decode()
    trail = html[html.index("field-learned_from") :][:600]
    assert "told the assistant: Julia, Küche" in trail


def test_the_forget_block_list_has_few_columns(admin_client):
    anna = PersonFactory(name="Anna")
    memories_forget(memory_ids=[MemoryFactory(scope="private", owner=anna).pk], actor=f"person:{anna.pk}")
    page = admin_client.get(reverse("admin:memories_tombstone_changelist"))
    assert len(page.context["result_headers"]) <= 7
    assert "Anna" in page.content.decode()
