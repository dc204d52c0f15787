"""Every admin page of the household's apps speaks the browser's language: a crawl in German (and in Italian) finds
none of the project's own English strings (the msgids of locale/<language>/LC_MESSAGES/django.po) and none of the
English words a German-speaking tester found on main (field names, choices, "Tombstone", "Turn #11", ...)."""

import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import pytest
from django.conf import settings
from django.utils import timezone

from justai_memory.tests.test_translations import po_entries
from memories.models import AuditAction, AuditEvent, ConsolidationRun, Provenance, RunStatus, Scope, Source
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Event, ExtractionStatus, Role, Sighting
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db

# The apps a household admin works in; Django's own pages (users, groups) and the job queue's are translated
# by their projects, the connections' by the connections app.
CRAWLED = ("/admin/memories/", "/admin/transcripts/", "/admin/people/")
SKIPPED = ("/export/", "/status.json", "/logout/", "/password_change/", "/history/")
PAGE_LIMIT = 150
# English a German page showed on main that no msgid holds (values, fallbacks of unmarked fields).
ENGLISH = [
    "Created at",
    "Updated at",
    "Started at",
    "Ended at",
    "Extraction status",
    "Extraction attempts",
    "Extraction error",
    "Speaker",
    "Tombstone",
    "Turn #",
    "Conversation #",
    "Memory #",
    "Block Lifted",
    "Household settings",
    "Personal memories to cloud",
    "Transcript retention days",
    "Occurrences",
    "Not Found",
    "Server Error",
    "Nach kind",
    "Nach scope",
    "Nach owner",
    "Nach language",
    "Nach status",
    "Nach source",
    "· Done",
    "[forgotten]",
]


class VisibleText(HTMLParser):
    """The text a reader sees: text nodes outside script and style, and the page title."""

    def __init__(self):
        super().__init__()
        self.parts: list[str] = []
        self.links: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "a":
            href = dict(attrs).get("href") or ""
            self.links.append(href)

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def english_strings(language: str) -> list[str]:
    """The project's msgids that ``language`` translates differently, as fragments a page would show."""
    entries = po_entries(Path(settings.BASE_DIR) / "locale" / language / "LC_MESSAGES" / "django.po")
    found = set()
    for msgid, translation in entries.items():
        translated = translation[0] if isinstance(translation, list) else translation
        for fragment in re.split(r"%\(\w+\)[sd]|%[sd]|\{\{[^}]*\}\}", msgid):
            fragment = fragment.strip(" .,:;()·\n")
            # Short fragments ("room", "Tool") are words a language could share or that name data; one
            # that the translation writes the same ("Status") is no finding.
            if len(fragment) >= 8 and fragment not in translated and " " in fragment:
                found.add(fragment)
    return sorted(found)


@pytest.fixture
def household():
    julia, marco = PersonFactory(name="Julia", preferred_language="de"), PersonFactory(name="Marco")
    kitchen = RoomFactory(name="Küche")
    now = timezone.now()
    conversation = ConversationFactory(
        room=kitchen,
        speaker=marco,
        language="de",
        started_at=now - timedelta(hours=2),
        ended_at=now - timedelta(hours=1),
        extraction_status=ExtractionStatus.DONE,
        extraction_stats={"facts": 1, "created": 1, "skipped_forgotten": 1},
    )
    TurnFactory(conversation=conversation, role=Role.USER, speaker=marco, text="Wer kommt heute?")
    TurnFactory(conversation=conversation, role=Role.ASSISTANT, text="Das Tor hat den Code [forgotten].")
    ConversationFactory(room=kitchen, speaker=julia, extraction_status=ExtractionStatus.WAITING_MODEL)
    memory = MemoryFactory(
        content="Julia hat am Dienstag einen Zahnarzttermin.",
        language="de",
        provenance=Provenance.EXTRACTED,
        source=Source.SESSION,
        source_ref=f"conversation:{conversation.pk}",
        scope=Scope.PRIVATE,
        owner=julia,
        access_count=2,
        last_accessed_at=now,
    )
    MemoryFactory(content="Im Keller steht das Fahrrad.", language="de", scope=Scope.ROOM, room=kitchen, about=marco)
    gone = MemoryFactory(content="Der Code für das Gartentor ist 4711.", language="de")
    memories_forget(memory_ids=[gone.pk], actor="admin:1")
    AuditEvent.objects.create(memory_id=memory.pk, action=AuditAction.BLOCK_LIFTED, actor=f"person:{julia.pk}")
    ConsolidationRun.objects.create(started_by="schedule", status=RunStatus.DONE, merged=1)
    Sighting.objects.create(person=julia, room=kitchen)
    Event.objects.create(kind="door.opened", room=kitchen, person=marco)
    return {"julia": julia, "memory": memory, "conversation": conversation}


def crawl(client, language: str) -> dict[str, str]:
    """Visible text of every admin page of the household's apps reachable from the home page (and a 404)."""
    pages: dict[str, str] = {}
    queue = ["/admin/", "/admin/people/household/", "/admin/memories/memory/add/", "/admin/nowhere/"]
    seen = set(queue)
    while queue and len(pages) < PAGE_LIMIT:
        url = queue.pop(0)
        response = client.get(url, HTTP_ACCEPT_LANGUAGE=language, follow=True)
        if "html" not in response.get("Content-Type", ""):
            continue
        parser = VisibleText()
        parser.feed(response.content.decode())
        pages[url] = re.sub(r"\s+", " ", " ".join(parser.parts))
        for href in parser.links:
            href = urldefrag(href)[0]
            path = urlsplit(href).path
            if (
                href.startswith("/admin/")
                and (path.startswith(CRAWLED) or href == "/admin/")
                and not any(part in path for part in SKIPPED)
                and href not in seen
            ):
                seen.add(href)
                queue.append(href)
    return pages


@pytest.mark.parametrize(
    ("language", "accept", "not_found"),
    [("de", "de-DE,de;q=0.9", "Seite nicht gefunden"), ("it", "it-IT,it;q=0.9", "Pagina non trovata")],
)
def test_every_admin_page_speaks_the_browsers_language(admin_client, household, language, accept, not_found):
    pages = crawl(admin_client, accept)
    assert len(pages) > 40
    assert not_found in pages["/admin/nowhere/"]
    strings = english_strings(language) + ENGLISH
    assert len(strings) > 100
    findings = sorted(
        {(url, s) for url, text in pages.items() for s in strings if re.search(rf"(?<!\w){re.escape(s)}(?!\w)", text)}
    )
    assert not findings, "\n".join(f"{url}: {s!r}" for url, s in findings)
