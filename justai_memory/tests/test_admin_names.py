"""Names instead of ids on the admin's pages: memories by their first words, people by name, turns numbered
within their conversation, languages by name, labels and scopes in words (issue 38)."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.actors import Actor
from memories.models import AuditAction, AuditEvent, Provenance, Scope, Source
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Event, Role
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db
GERMAN = {"HTTP_ACCEPT_LANGUAGE": "de-DE,de;q=0.9"}


def test_a_memory_is_named_by_its_first_words_on_its_page_and_in_the_saved_message(admin_client):
    memory = MemoryFactory(content="Der Ersatzschlüssel liegt in der blauen Dose im Flur.", language="de")
    url = reverse("admin:memories_memory_change", args=[memory.pk])
    page = admin_client.get(url).content.decode()
    title = "“Der Ersatzschlüssel liegt in der blauen …”"
    assert f"<title>{title} |" in page and f"<h2>{title}</h2>" in page and f"&rsaquo; {title}" in page
    assert "Memory #" not in page
    data = {
        "content": memory.content,
        "language": "de",
        "kind": memory.kind,
        "provenance": memory.provenance,
        "confidence": 1,
        "importance": 0.5,
        "scope": "shared",
        "valid_at_0": "2026-12-01",
        "valid_at_1": "10:00:00",
        "subject": "",
        "predicate": "",
    }
    saved = admin_client.post(url, data, follow=True)
    messages = [str(m) for m in saved.context["messages"]]
    assert len(messages) == 1 and title in messages[0] and "Memory #" not in messages[0], messages
    german = admin_client.get(url, **GERMAN).content.decode()
    assert "„Der Ersatzschlüssel liegt in der blauen …“" in german


def test_turns_are_numbered_within_their_conversation_and_actors_and_languages_are_named(admin_client):
    julia, kitchen = PersonFactory(name="Julia", preferred_language="de"), RoomFactory(name="Küche")
    first = ConversationFactory(
        room=kitchen, speaker=julia, language="it", extraction_stats={"created": 1, "skipped_forgotten": 2}
    )
    for text in ("Ciao", "Come stai?", "Bene"):
        TurnFactory(conversation=first, role=Role.USER, speaker=julia, text=text)
    second = ConversationFactory(room=kitchen, speaker=julia, language="de")
    TurnFactory(conversation=second, role=Role.USER, speaker=julia, text="Hallo")
    TurnFactory(conversation=second, role=Role.ASSISTANT, text="Guten Tag")
    page = admin_client.get(reverse("admin:transcripts_conversation_change", args=[second.pk]), **GERMAN)
    text = page.content.decode()
    assert "Beitrag 1" in text and "Beitrag 2" in text and "Beitrag 4" not in text and "Turn #" not in text
    assert re.search(r"Sprache:</label>\s*<div class=\"readonly\">Deutsch</div>", text)
    conversations = admin_client.get(reverse("admin:transcripts_conversation_changelist"), **GERMAN).content.decode()
    assert "Italienisch · Lokal" in conversations
    assert "gespeichert 1, ausgelassen (vergessen) 2" in conversations and "skipped_forgotten" not in conversations
    memory = MemoryFactory(
        content="Julia trinkt Tee.", language="de", provenance=Provenance.CONFIRMED, scope=Scope.PRIVATE, owner=julia
    )
    AuditEvent.objects.create(memory_id=memory.pk, action=AuditAction.EDITED, actor=f"person:{julia.pk}")
    audit = admin_client.get(reverse("admin:memories_auditevent_changelist"), **GERMAN).content.decode()
    assert "Julia" in audit and f"person:{julia.pk}" not in audit and "Bearbeitet" in audit
    overview = admin_client.get(f"/admin/people/person/{julia.pk}/overview/", **GERMAN).content.decode()
    assert "Bevorzugt die Sprache „Deutsch“" in overview
    memories = admin_client.get(reverse("admin:memories_memory_changelist"), **GERMAN).content.decode()
    assert '<td class="field-language_name">Deutsch</td>' in memories and "?language=de" in memories
    preview = admin_client.get(
        reverse("admin:memories_memory_recall_preview"),
        {"query": "Tee", "speaker": julia.pk, "room": kitchen.pk, "model_location": "local", "limit": 5},
        **GERMAN,
    ).content.decode()
    row = re.search(r'<table id="recall-memories">.*?</table>', preview, re.S).group(0)
    assert "bestätigt" in row and "Privat" in row and "Deutsch" in row
    assert "confirmed" not in row and "private" not in row and ">de<" not in row
    assert '<option value="local" selected>Lokal</option>' in preview


def test_rows_are_named_by_who_and_when_on_pages_confirmations_and_audit_lines(admin_client, settings):
    """Issue 50: the history page, the delete confirmation, the audit log, the person and status pages name rows as
    a person recognises them; the saved message quotes a memory once."""
    julia, kitchen = PersonFactory(name="Julia", preferred_language="de"), RoomFactory(name="Küche")
    earlier = ConversationFactory(room=kitchen, speaker=julia)
    for n in range(6):  # turns of another conversation first: the ids of the next ones are not 1-5
        TurnFactory(conversation=earlier, speaker=julia, text=f"Vorher {n}")
    conversation = ConversationFactory(room=kitchen, speaker=julia)
    for n in range(5):
        TurnFactory(conversation=conversation, speaker=julia, text=f"Satz {n}")
    memory = MemoryFactory(content="Der Ersatzschlüssel liegt in der blauen Dose im Flur.", language="de")
    event = Event.objects.create(kind="temperature", room=kitchen)
    for actor in (Actor.event(event.pk), Actor.job("memory.extract")):
        AuditEvent.objects.create(memory_id=memory.pk, action=AuditAction.EDITED, actor=actor)
    title = "„Der Ersatzschlüssel liegt in der blauen …“"

    history = admin_client.get(reverse("admin:memories_memory_history", args=[memory.pk]), **GERMAN).content.decode()
    assert f"<h1>Änderungsgeschichte: {title}</h1>" in history and f"{title}</a>" in history
    assert "Memory #" not in history

    delete = reverse("admin:transcripts_conversation_delete", args=[conversation.pk])
    confirmation = admin_client.get(delete, **GERMAN).content.decode()
    assert "Gespräch mit Julia, " in confirmation and "Gespräch #" not in confirmation
    assert all(f"Beitrag {n}" in confirmation for n in range(1, 6)) and "Beitrag 6" not in confirmation
    assert "Beitrag #" not in confirmation

    audit = admin_client.get(reverse("admin:memories_auditevent_changelist"), **GERMAN).content.decode()
    assert "Ereignis „temperature“" in audit and "der Auftrag „Gespräche lesen“" in audit
    assert f"event:{event.pk}" not in audit and "memory.extract" not in audit
    events = admin_client.get(reverse("admin:transcripts_event_change", args=[event.pk]), **GERMAN).content.decode()
    assert "Event #" not in events and "Ereignis „temperature“" in events

    MemoryFactory(content="Julia mag Tee.", language="de", scope=Scope.PRIVATE, owner=julia)
    overview = admin_client.get(f"/admin/people/person/{julia.pk}/overview/", **GERMAN).content.decode()
    assert not re.search(r">#\d+</a>", overview) and "Julia mag Tee.</a>" in overview

    start = timezone.now() - timedelta(minutes=10)
    ConversationFactory(
        room=kitchen, speaker=julia, started_at=start, ended_at=start, extraction_status="waiting_model"
    )
    status = admin_client.get("/admin/", **GERMAN).content.decode()
    table = status.split('id="status-extractions"')[1]
    assert "Julia in Küche</a>" in table and not re.search(r">#\d+</a>", table)

    url = reverse("admin:memories_memory_change", args=[memory.pk])
    data = {
        "content": memory.content,
        "language": "de",
        "kind": memory.kind,
        "provenance": memory.provenance,
        "confidence": 1,
        "importance": 0.5,
        "scope": "shared",
        "valid_at_0": "01.12.2026",
        "valid_at_1": "10:00:00",
        "subject": "",
        "predicate": "",
    }
    saved = admin_client.post(url, data, follow=True, **GERMAN)
    message = next(str(m) for m in saved.context["messages"])
    assert title in message and "„„" not in message and "““" not in message, message


def test_the_person_page_and_the_memory_page_say_alike_where_a_memory_came_from(admin_client):
    """One function says where a memory was learnt: "told the assistant: Julia" on both pages, never "-" on one."""
    julia = PersonFactory(name="Julia", preferred_language="de")
    memory = MemoryFactory(
        content="Julia trinkt abends Kamillentee.", language="de", source=Source.TOOL, source_ref="", about=julia
    )
    AuditEvent.objects.create(memory_id=memory.pk, action=AuditAction.CREATED, actor=Actor.speaker(julia))
    page = admin_client.get(reverse("admin:memories_memory_change", args=[memory.pk]), **GERMAN).content.decode()
    overview = admin_client.get(f"/admin/people/person/{julia.pk}/overview/", **GERMAN).content.decode()
    told = "dem Assistenten gesagt: Julia"
    assert told in page and told in overview.split('id="person-memories"')[1]
