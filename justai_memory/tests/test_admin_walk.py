"""Every page of the admin, as a logged-in superuser with a row in every table, in German and in Italian: each
registered model's list, add, change, history and delete confirmation, each action's confirmation (or its
message), and the pages the household opens besides (status, a person's page, the recall preview). None shows an
English UI string: the project's own msgids, those of the apps whose pages the admin shows (Django's admin and
auth, django-q2, django-oauth-toolkit) that the language leaves in English, and the strings a tester found."""

import io
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.test import RequestFactory
from django.urls import NoReverseMatch, reverse
from django.utils import timezone, translation
from django_q.models import OrmQ, Schedule, Task
from django_q.signing import SignedPackage

from connections.models import Access, Connection
from connections.tests.test_oauth import REDIRECT, approve, exchange
from justai_memory.tests.test_admin_languages import VisibleText, english_strings
from justai_memory.tests.test_translations import po_entries
from memories.actors import Actor
from memories.models import (
    AuditAction,
    AuditEvent,
    ConsolidationRun,
    EmbeddingSpace,
    Provenance,
    RunStatus,
    Scope,
    Source,
)
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.models import Household
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Event, ExtractionStatus, Role, Sighting
from transcripts.selectors import EXTRACT_JOB
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db

# English a tester read on German or Italian pages, beside the msgids below (labels without a msgid, values).
FOUND = [
    "Model location",
    "Group",
    "Started at",
    "Stopped at",
    "Time taken",
    "Successful tasks",
    "Failed tasks",
    "Scheduled tasks",
    "Resubmit selected tasks to queue",
    "Add link",
    "Change or view list link",
    "OpenID Connect hybrid",
    "Waiting for the model",
    "Start that server",
    "nothing answered at",
    "APIConnectionError from",
    "Nach Group",
    "Nach Cluster key",
    "Memory #",
    "Event #",
    "Turn #",
    "job memory",
    "ago",
    "„note“",
    "'note'",
]
# Words an English msgid shares with German or Italian (a name, a loanword): on a page they are no finding.
SHARED = {
    "en": set(),
    "de": {"Name", "Cluster", "Status", "Hook", "Cron", "Client", "Server", "Token", "Link", "Details", "Filter"},
    "it": {"Cluster", "Hook", "Cron", "Client", "Server", "Token", "Link", "Filter", "Password", "Email"},
}
THIRD_PARTY_SOURCES = ("django_q/models.py", "django_q/admin.py", "oauth2_provider/models.py")
THIRD_PARTY_CATALOGUES = ("django/contrib/admin", "django/contrib/auth")
LANGUAGES = [("de", "de-DE,de;q=0.9"), ("it", "it-IT,it;q=0.9")]


def site_packages() -> Path:
    import django

    return Path(django.__file__).parent.parent


def third_party_msgids() -> set[str]:
    """The msgids of the apps whose pages the admin shows: Django's admin and auth catalogues, and the strings
    django-q2 and django-oauth-toolkit mark in their models and admin (the latter ship no catalogue)."""
    root = site_packages()
    found = set()
    for catalogue in THIRD_PARTY_CATALOGUES:
        found.update(po_entries(root / catalogue / "locale" / "de" / "LC_MESSAGES" / "django.po"))
    for source in THIRD_PARTY_SOURCES:
        found.update(re.findall(r'_\(\s*"([^"\n]+)"\s*\)', (root / source).read_text()))
    return {msgid for msgid in found if msgid}


def untranslated(language: str) -> set[str]:
    """The third-party msgids that the page's language leaves as they are (plain words, as a page shows them)."""
    with translation.override(language):
        left = {msgid for msgid in third_party_msgids() if translation.gettext(msgid) == msgid}
    words = set()
    for msgid in left:
        for fragment in re.split(r"%\(\w+\)[sd]|%[sd]|\{[^}]*\}|<[^>]*>", msgid):
            fragment = fragment.strip(" .,:;()·?!\n\"'")
            if len(fragment) >= 5 and re.fullmatch(r"[A-Za-z][A-Za-z ,'-]*", fragment):
                words.add(fragment)
    return {w for w in words if w not in SHARED[language] and w.lower() not in {s.lower() for s in SHARED[language]}}


def english_words(language: str) -> list[str]:
    return sorted(set(english_strings(language)) | untranslated(language) | set(FOUND))


@pytest.fixture
def everything(admin_user, client):
    """A row in every table the admin lists: people, rooms, memories and their records, conversations with turns
    (one waiting for an unreachable model), sightings, events, a connection and its client, the job queue."""
    julia, marco = PersonFactory(name="Julia", preferred_language="de"), PersonFactory(name="Marco")
    kitchen = RoomFactory(name="Küche")
    Household.load()
    now = timezone.now()
    conversation = ConversationFactory(
        room=kitchen,
        speaker=marco,
        started_at=now - timedelta(hours=2),
        ended_at=now - timedelta(hours=1),
        extraction_status=ExtractionStatus.DONE,
        extraction_stats={"facts": 1, "created": 1},
    )
    for text in ("Wer kommt heute?", "Julia kommt um sieben.", "Danke"):
        TurnFactory(conversation=conversation, role=Role.USER, speaker=marco, text=text)
    waiting = ConversationFactory(
        room=kitchen,
        speaker=julia,
        started_at=now - timedelta(minutes=30),
        ended_at=now - timedelta(minutes=20),
        extraction_status=ExtractionStatus.WAITING_MODEL,
        extraction_attempts=1,
        extraction_error="APIConnectionError from the 'memory' provider: nothing answered at http://127.0.0.1:9/v1",
    )
    TurnFactory(conversation=waiting, role=Role.USER, speaker=julia, text="Der Müll geht am Montag raus.")
    memory = MemoryFactory(
        content="Julia hat am Dienstag einen Zahnarzttermin.",
        language="de",
        provenance=Provenance.EXTRACTED,
        source=Source.SESSION,
        source_ref=f"conversation:{conversation.pk}",
        scope=Scope.PRIVATE,
        owner=julia,
    )
    event = Event.objects.create(kind="temperature", room=kitchen, person=marco, payload={"celsius": 21})
    MemoryFactory(
        content="In der Küche sind 21 Grad.", language="de", source=Source.EVENT, scope=Scope.ROOM, room=kitchen
    )
    gone = MemoryFactory(content="Der Code für das Gartentor ist 4711.", language="de")
    memories_forget(memory_ids=[gone.pk], actor=Actor.admin(admin_user))
    for actor in (Actor.speaker(julia), Actor.event(event.pk), Actor.job("memory.extract"), Actor.SCHEDULE):
        AuditEvent.objects.create(memory_id=memory.pk, action=AuditAction.EDITED, actor=actor)
    run = ConsolidationRun.objects.create(
        started_by=Actor.SCHEDULE, status=RunStatus.FAILED, error="OperationalError: x"
    )
    EmbeddingSpace.objects.get_or_create(pk=1, defaults={"embedder": "hash", "dim": 8})
    Sighting.objects.create(person=julia, room=kitchen)
    Group.objects.create(name="Familie")
    # The job queue: a schedule, a done and a failed job, one waiting in the ORM broker.
    Schedule.objects.create(name="memories.consolidate", func="memories.jobs.memories_consolidate_job")
    for success in (True, False):
        Task.objects.create(
            id=f"{int(success):032d}",
            name=f"memory.extract:{conversation.pk}" if success else f"memory.consolidate:{run.pk}",
            func=EXTRACT_JOB,
            group="extraction",
            started=now - timedelta(seconds=5),
            stopped=now,
            success=success,
            result=None if success else "ProviderUnreachable: nothing answered",
        )
    OrmQ.objects.create(
        key="default",
        payload=SignedPackage.dumps({"id": "1" * 32, "name": "waiting", "func": EXTRACT_JOB, "args": (1,)}),
    )
    # A connection, made the way a client makes one (its client registered by the admin's command).
    client.force_login(admin_user)
    out = io.StringIO()
    call_command("oauth_client", "--name", "Home Assistant", stdout=out, stderr=io.StringIO())
    lines = dict(line.split(": ", 1) for line in out.getvalue().splitlines())
    query = approve(client, lines["client_id"], room=kitchen, speaker=julia, access=Access.ALL)
    exchange(client, lines["client_id"], lines["client_secret"], query["code"], redirect_uri=REDIRECT)
    assert Connection.objects.exists()
    return {"julia": julia, "memory": memory, "conversation": conversation, "waiting": waiting, "event": event}


def admin_urls(user, everything) -> list[tuple[str, str, dict | None]]:
    """(name, url, POST data or None) of every page: per registered model its list, add, change, history and
    delete confirmation, each action's confirmation; then the pages reached from them."""
    request = RequestFactory().get("/admin/")
    request.user = user
    pages = [("status", "/admin/", None)]
    for model, model_admin in admin.site._registry.items():
        info = model._meta.app_label, model._meta.model_name
        pages.append((f"{model._meta.label} list", reverse("admin:{}_{}_changelist".format(*info)), None))
        if model_admin.has_add_permission(request):
            pages.append((f"{model._meta.label} add", reverse("admin:{}_{}_add".format(*info)), None))
        obj = model_admin.get_queryset(request).order_by("pk").first()
        if obj is None:
            continue
        allowed = {
            "change": model_admin.has_view_or_change_permission(request, obj),
            "history": model_admin.has_view_or_change_permission(request, obj),
            "delete": model_admin.has_delete_permission(request, obj),
        }
        for page in [page for page, allowed in allowed.items() if allowed]:
            try:
                url = reverse(f"admin:{info[0]}_{info[1]}_{page}", args=[obj.pk])
            except NoReverseMatch:
                continue
            pages.append((f"{model._meta.label} {page}", url, None))
        for action in model_admin.get_actions(request):
            data = {"action": action, "_selected_action": [obj.pk], "index": 0}
            changelist = reverse("admin:{}_{}_changelist".format(*info))
            pages.append((f"{model._meta.label} action {action}", changelist, data))
    julia = everything["julia"]
    pages.append(("person overview", f"/admin/people/person/{julia.pk}/overview/", None))
    pages.append(("recall preview", reverse("admin:memories_memory_recall_preview"), None))
    # Actions last: some act (resubmit, revoke) and the pages after them would show other rows.
    return sorted(pages, key=lambda page: page[2] is not None)


class UnfoldedText(VisibleText):
    """The text a household admin reads without opening anything: a ``<details>`` shows its summary only (the
    operator's detail, such as the stored error, is folded away there)."""

    def __init__(self):
        super().__init__()
        self._folded = 0
        self._summary = 0

    def handle_starttag(self, tag, attrs):
        super().handle_starttag(tag, attrs)
        self._folded += tag == "details"
        self._summary += tag == "summary"

    def handle_endtag(self, tag):
        super().handle_endtag(tag)
        self._folded -= tag == "details"
        self._summary -= tag == "summary"

    def handle_data(self, data):
        if not self._folded or self._summary:
            super().handle_data(data)


def visible(response) -> str:
    parser = UnfoldedText()
    parser.feed(response.content.decode())
    return re.sub(r"\s+", " ", " ".join(parser.parts))


def test_jobs_are_named_by_what_they_do_and_on_what(client, admin_user, everything):
    german = {"HTTP_ACCEPT_LANGUAGE": "de-DE,de;q=0.9"}
    done = visible(client.get("/admin/django_q/success/", **german))
    assert "Gespräch lesen: Gespräch mit Marco, " in done and "Gruppe" in done
    failed = visible(client.get("/admin/django_q/failure/", **german))
    assert "Erinnerungen zusammenführen: " in failed


@pytest.mark.parametrize(("language", "accept"), LANGUAGES)
def test_every_admin_page_is_in_the_households_language(client, admin_user, everything, language, accept):
    words = english_words(language)
    findings, walked = [], 0
    for name, url, data in admin_urls(admin_user, everything):
        if data is None:
            response = client.get(url, HTTP_ACCEPT_LANGUAGE=accept, follow=True)
        else:
            response = client.post(url, data, HTTP_ACCEPT_LANGUAGE=accept, follow=True)
        assert response.status_code == 200, (name, url, response.status_code)
        walked += 1
        if "html" not in response["Content-Type"]:
            continue  # a download (a person's export): data, not the admin's words
        text = visible(response)
        for word in words:
            if re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE):
                findings.append(f"{name} ({url}): {word!r}")
    assert walked > 70
    assert not findings, f"{len(findings)} English strings:\n" + "\n".join(findings)


def test_the_english_list_holds_the_third_party_strings():
    """The list is not empty by accident: the third-party strings are read, and English pages keep them."""
    msgids = third_party_msgids()
    assert {"Resubmit selected tasks to queue", "Successful tasks", "Started at", "Add link"} <= msgids
    assert "OpenID connect hybrid" in msgids and "Change or view list link" in msgids
    assert "Started at" in untranslated("en") and len(english_words("de")) > 150
