"""The household's admin pages (issue 30): status home, provenance trail, a person's page, forgetting in words,
the admin in German and Italian, lists that fit, the note's detected language."""

import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.utils import timezone
from django.utils.formats import date_format
from django_q.models import Schedule

from justai_memory.admin.status import bar_chart
from memories.models import (
    AuditAction,
    AuditEvent,
    Memory,
    MemoryAccess,
    Provenance,
    RecallDay,
    Scope,
    Source,
    Tombstone,
)
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, ExtractionStatus, Role
from transcripts.selectors import EXTRACT_JOB
from transcripts.services.extraction.run import RETRY_SCHEDULE
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db
MEMORIES = "/admin/memories/memory/"
CONVERSATIONS = "/admin/transcripts/conversation/"
PEOPLE = "/admin/people/person/"
TOMBSTONES = "/admin/memories/tombstone/"


@pytest.fixture
def household():
    """Julia speaks in Marco's conversation in the kitchen; it taught the assistant one thing, one was forgotten."""
    julia, marco = PersonFactory(name="Julia"), PersonFactory(name="Marco")
    kitchen = RoomFactory(name="Küche")
    now = timezone.now()
    conversation = ConversationFactory(
        room=kitchen,
        speaker=marco,
        started_at=now - timedelta(hours=2),
        ended_at=now - timedelta(hours=1),
        extraction_status=ExtractionStatus.DONE,
        extraction_stats={"facts": 1, "created": 1, "skipped_forgotten": 2},
    )
    TurnFactory(conversation=conversation, role=Role.USER, speaker=marco, text="Wer kommt heute?")
    TurnFactory(conversation=conversation, role=Role.USER, speaker=julia, text="Ich gehe Dienstag zum Zahnarzt.")
    memory = MemoryFactory(
        content="Julia hat am Dienstag einen Zahnarzttermin.",
        language="de",
        provenance=Provenance.EXTRACTED,
        source=Source.SESSION,
        source_ref=f"conversation:{conversation.pk}",
        scope=Scope.PRIVATE,
        owner=julia,
        access_count=3,
        last_accessed_at=now - timedelta(days=2),
    )
    return {"julia": julia, "marco": marco, "kitchen": kitchen, "conversation": conversation, "memory": memory}


def test_the_admin_home_is_the_status_page(admin_client, household):
    conversation = household["conversation"]
    failed = ConversationFactory(
        room=household["kitchen"],
        started_at=timezone.now() - timedelta(minutes=5),
        ended_at=timezone.now(),
        extraction_status=ExtractionStatus.FAILED,
        extraction_attempts=1,
        extraction_error="APIConnectionError: the model did not answer",
    )
    retry_at = timezone.now() + timedelta(minutes=4)
    Schedule.objects.create(
        name=RETRY_SCHEDULE.format(id=failed.pk),
        func=EXTRACT_JOB,
        args=repr((failed.pk,)),
        schedule_type=Schedule.ONCE,
        repeats=-1,
        next_run=retry_at,
    )
    page = admin_client.get("/admin/")
    html = page.content.decode()
    assert page.status_code == 200
    for part in ('id="status-model"', 'id="status-cluster"', 'id="status-consolidation"', 'id="status-extractions"'):
        assert part in html
    status = page.context["status"]
    assert status["components"]["llm"]["base_url"] in html  # the health report's model provider, its URL
    assert [row["conversation"].pk for row in status["extractions"]] == [failed.pk]
    assert status["extractions"][0]["next_retry"] == retry_at
    assert f"{CONVERSATIONS}{failed.pk}/change/" in html and f"{CONVERSATIONS}{conversation.pk}/change/" not in html
    assert (
        html.count('class="status-chart"') == 3 and "<script" not in html.split('id="status"')[1].split("app-list")[0]
    )
    # the charts' figures: one memory (from conversation), no recall counted (a memory's last access is not
    # a recall of that day), one extraction done
    memories, recalls, extractions = status["charts"]
    assert {name: total for _c, name, total in memories.legend}["from conversation"] == 1
    assert recalls.legend[0][2] == 0
    totals = {name: total for _c, name, total in extractions.legend}
    assert totals["Done"] == 1 and totals["Failed"] == 1
    health = admin_client.get("/admin/status.json")
    assert health.json()["components"]["llm"]["base_url"] == status["components"]["llm"]["base_url"]


def test_the_recalls_chart_draws_the_recalls_counted_on_each_of_the_last_30_days(admin_client, household):
    today = timezone.localdate()
    RecallDay.objects.bulk_create(
        [
            RecallDay(day=today, count=5),
            RecallDay(day=today - timedelta(days=2), count=3),
            RecallDay(day=today - timedelta(days=40), count=7),  # before the chart's 30 days
        ]
    )
    page = admin_client.get("/admin/")
    recalls = page.context["status"]["charts"][1]
    assert recalls.title == "Recalls per day" and recalls.legend[0][1:] == ("recalls", 8)
    svg = str(recalls.svg)
    assert svg.count("<rect") == 2 and "recalls 5</title>" in svg and "recalls 3</title>" in svg
    assert f"{date_format(today - timedelta(days=2), 'SHORT_DATE_FORMAT')}: recalls 3" in svg
    html = page.content.decode()
    assert "Recalls per day" in html and svg in html and "last recall" not in html
    german = admin_client.get("/admin/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9").content.decode()
    assert "Abrufe pro Tag" in german


def test_the_status_page_and_its_report_need_a_login(client):
    assert client.get("/admin/").status_code == 302
    assert client.get("/admin/status.json").status_code == 302


def test_a_memory_page_shows_where_it_came_from(admin_client, household):
    memory, conversation = household["memory"], household["conversation"]
    AuditEvent.objects.create(memory_id=memory.pk, action=AuditAction.EDITED, actor=f"person:{household['julia'].pk}")
    html = admin_client.get(f"{MEMORIES}{memory.pk}/change/").content.decode()
    assert f'href="{CONVERSATIONS}{conversation.pk}/change/"' in html
    trail = html.split('id="trail-source"')[1].split("</div>")[0]
    assert "Julia, Marco" in trail and "Küche" in trail  # everyone who spoke a turn, the room
    assert "conversation:" not in html.split("field-learned_from")[1].split("</div>")[0]
    history = html.split("field-audit_trail")[1].split("all events")[0]
    assert "Julia" in history and "person:" not in history  # the actor by name


def test_a_conversation_page_lists_what_it_taught_and_counts_what_was_left_out(admin_client, household):
    memory, conversation = household["memory"], household["conversation"]
    html = admin_client.get(f"{CONVERSATIONS}{conversation.pk}/change/").content.decode()
    assert f'href="{MEMORIES}{memory.pk}/change/"' in html and "Zahnarzttermin" in html
    assert "2 items were not stored: they had been forgotten." in html
    assert "Julia, Marco" in html.split("field-who_spoke")[1]


def test_a_persons_page_shows_their_memories_conversations_of_any_turn_and_a_forget_per_memory(admin_client, household):
    julia, memory = household["julia"], household["memory"]
    about = MemoryFactory(content="Julia mag keinen Kaffee.", about=julia)
    MemoryFactory(content="Marco spielt Gitarre.", scope=Scope.PRIVATE, owner=household["marco"])
    page = admin_client.get(f"{PEOPLE}{julia.pk}/overview/")
    html = page.content.decode()
    assert "Zahnarzttermin" in html and "Julia mag keinen Kaffee." in html and "Gitarre" not in html
    # Julia spoke a turn in Marco's conversation: it is listed
    assert f'href="{CONVERSATIONS}{household["conversation"].pk}/change/"' in html
    assert f"{PEOPLE}{julia.pk}/export/" in html
    forget = f"{MEMORIES}{memory.pk}/delete/?next=%2Fadmin%2Fpeople%2Fperson%2F{julia.pk}%2Foverview%2F"
    assert forget.replace("&", "&amp;") in html
    confirm = admin_client.get(forget).content.decode()
    assert "Julia hat am Dienstag einen Zahnarzttermin." in confirm and "no text" in confirm
    response = admin_client.post(forget, {"post": "yes", "next": f"{PEOPLE}{julia.pk}/overview/"})
    assert response.status_code == 302 and response["Location"] == f"{PEOPLE}{julia.pk}/overview/"
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert Tombstone.objects.filter(owner=julia, memory_id=memory.pk).exists()  # the block stays
    # an address on another host is not followed
    other = admin_client.post(f"{MEMORIES}{about.pk}/delete/", {"post": "yes", "next": "https://example.com/"})
    assert other["Location"] == MEMORIES


def test_forgetting_and_lifting_say_what_they_do(admin_client, household):
    memory = household["memory"]
    change = admin_client.get(f"{MEMORIES}{memory.pk}/change/").content.decode()
    assert ">Forget</a>" in change and ">Delete</a>" not in change
    listing = admin_client.get(MEMORIES).content.decode()
    assert "Forget the selected memories" in listing and "Delete selected" not in listing
    bulk = admin_client.post(MEMORIES, {"action": "delete_selected", ACTION_CHECKBOX_NAME: [memory.pk]})
    assert "Julia hat am Dienstag einen Zahnarzttermin." in bulk.content.decode()
    memories_forget(memory_ids=[memory.pk], actor="test")
    block = Tombstone.objects.get()
    page = admin_client.get(f"{TOMBSTONES}{block.pk}/change/").content.decode()
    assert "Allow remembering again" in page and ">Delete</a>" not in page
    assert "word marks" not in page.lower() and "field-word_marks" not in page
    lift = admin_client.get(f"{TOMBSTONES}{block.pk}/delete/").content.decode()
    assert "the assistant may learn that content anew" in lift


def test_rerunning_from_the_conversation_page_queues_it_and_replaces_the_retry(admin_client, household):
    failed = ConversationFactory(
        room=household["kitchen"],
        started_at=timezone.now() - timedelta(minutes=5),
        ended_at=timezone.now(),
        extraction_status=ExtractionStatus.FAILED,
        extraction_attempts=1,
    )
    Schedule.objects.create(
        name=RETRY_SCHEDULE.format(id=failed.pk),
        func=EXTRACT_JOB,
        args=repr((failed.pk,)),
        schedule_type=Schedule.ONCE,
        repeats=-1,
        next_run=timezone.now() + timedelta(hours=1),
    )
    before = admin_client.get(f"{CONVERSATIONS}{failed.pk}/change/").content.decode()
    assert 'id="rerun-extraction"' in before and "ago)" not in before.split("field-next_retry")[1][:300]
    response = admin_client.post(f"{CONVERSATIONS}{failed.pk}/rerun/", follow=True)
    html = response.content.decode()
    assert "Queued extraction for 1 conversation" in html and "replaced" in html
    assert Conversation.objects.get(pk=failed.pk).extraction_status == ExtractionStatus.QUEUED
    assert not Schedule.objects.filter(name=RETRY_SCHEDULE.format(id=failed.pk)).exists()
    assert admin_client.get(f"{CONVERSATIONS}{failed.pk}/rerun/").status_code == 405


def test_the_admin_speaks_german_and_italian(admin_client, household, settings):
    memory, julia = household["memory"], household["julia"]
    pages = [
        "/admin/",
        f"{MEMORIES}{memory.pk}/change/",
        f"{PEOPLE}{julia.pk}/overview/",
        f"{MEMORIES}{memory.pk}/delete/",
        MEMORIES,
    ]
    german = [admin_client.get(url, HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9").content.decode() for url in pages]
    assert "Sprachmodell" in german[0] and "Jobcluster" in german[0]  # ours
    assert "Abmelden" in german[0]  # Django's
    assert "Gelernt aus" in german[1] or "gelernt aus" in german[1]
    assert "Was der Assistent über Julia weiß" in german[2]
    assert "Vergessen" in german[3] and "ohne Text" in german[3]
    assert "vor 2\xa0Tagen" in german[4] and "Tage her" not in german[4]  # "last recalled 2 days ago", in German
    italian = [admin_client.get(url, HTTP_ACCEPT_LANGUAGE="it-IT,it;q=0.9").content.decode() for url in pages]
    assert "Modello linguistico" in italian[0] and "Benvenuto" in italian[0]
    assert "Cosa sa l\u2019assistente di Julia" in italian[2]
    assert "2\xa0giorni fa" in italian[4]
    assert "Dimentica" in italian[3]
    # the household's default when the browser asks for none of them
    settings.LANGUAGE_CODE = "de"
    assert "Sprachmodell" in admin_client.get("/admin/", HTTP_ACCEPT_LANGUAGE="fr").content.decode()


def test_dates_are_shown_in_the_households_zone_and_format(admin_client, household, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    conversation = household["conversation"]
    Conversation.objects.filter(pk=conversation.pk).update(
        started_at=datetime(2026, 12, 2, 3, 1, tzinfo=UTC),
        ended_at=datetime(2026, 12, 2, 3, 30, tzinfo=UTC),
    )
    html = admin_client.get(CONVERSATIONS, HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "02.12.2026 04:01" in html  # German format, Berlin time (UTC+1)


def test_a_note_starts_without_a_language_so_it_is_detected(admin_client):
    page = admin_client.get(f"{MEMORIES}add/").content.decode()
    field = page.split('id="id_language"')[0].rsplit("<input", 1)[1] + page.split('id="id_language"')[1].split(">")[0]
    assert 'value="en"' not in field
    admin_client.post(
        f"{MEMORIES}add/",
        {
            "content": "Der Wasserhahn im Bad tropft, der Installateur kommt am Freitag.",
            "language": "",
            "scope": "shared",
            "importance": 0.5,
        },
    )
    assert Memory.objects.get().language == "de"


def test_the_memory_list_is_narrow_and_names_its_counts(admin_client, household):
    page = admin_client.get(MEMORIES)
    headers = [str(h["text"]) for h in page.context["result_headers"]]
    assert len(headers) <= 9
    html = page.content.decode()
    assert "3 times" in html and "2\xa0days ago" in html  # not a raw timestamp
    delete = admin_client.post(MEMORIES, {"action": "delete_selected", ACTION_CHECKBOX_NAME: [household["memory"].pk]})
    assert "accesss" not in delete.content.decode()
    assert MemoryAccess._meta.verbose_name_plural == "memory accesses"


def test_a_staff_user_sees_memory_text_and_conversations_only_with_the_permission_to_view_them(
    client, django_user_model, household
):
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_person", "view_conversation"]))
    client.force_login(user)
    julia, conversation = household["julia"], household["conversation"]
    person = client.get(f"{PEOPLE}{julia.pk}/overview/").content.decode()
    assert "Zahnarzttermin" not in person and f"{CONVERSATIONS}{conversation.pk}/change/" in person
    page = client.get(f"{CONVERSATIONS}{conversation.pk}/change/").content.decode()
    assert "Zahnarzttermin" not in page and "field-memories_made" not in page
    user.user_permissions.add(Permission.objects.get(codename="view_memory"))
    client.force_login(django_user_model.objects.get(pk=user.pk))
    assert "Zahnarzttermin" in client.get(f"{PEOPLE}{julia.pk}/overview/").content.decode()
    assert "Zahnarzttermin" in client.get(f"{CONVERSATIONS}{conversation.pk}/change/").content.decode()


def test_the_charts_first_and_last_dates_stay_inside_the_chart():
    """Centred on the last bar, the last date ran past the chart's edge and was cut ("03.12.2")."""
    days = [date(2026, 11, 4) + timedelta(days=i) for i in range(30)]
    svg = str(bar_chart(days, {"recalls": [1] * 30}, label="Recalls per day").svg)
    width = float(re.search(r'viewBox="0 0 (\d+)', svg).group(1))
    ticks = re.findall(r'<text x="([\d.]+)" y="[\d.]+" font-size="11" text-anchor="(\w+)"', svg)
    first, *_, last = [(float(x), anchor) for x, anchor in ticks]
    assert first[1] == "start" and first[0] >= 0
    assert last == (width, "end")
