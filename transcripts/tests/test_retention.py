"""Retention: transcripts, sightings and events past their days are purged; memories stay."""

import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.locks import LockId
from memories.models import Memory
from memories.tests.factories import MemoryFactory
from people.models import Household
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.jobs import transcripts_purge_job
from transcripts.models import Conversation, Event, Sighting, Turn
from transcripts.services.retention import transcripts_purge
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db


def days_ago(days: float):
    return timezone.now() - timedelta(days=days)


@pytest.fixture
def household():
    """Old and recent rows of each kind, and a memory learned from the old conversation."""
    anna, hall = PersonFactory(), RoomFactory()
    old = ConversationFactory(started_at=days_ago(400), ended_at=days_ago(399))
    long_open = ConversationFactory(started_at=days_ago(366))  # never ended: its start counts
    recent = ConversationFactory(started_at=days_ago(364), ended_at=days_ago(364))
    ended_recently = ConversationFactory(started_at=days_ago(370), ended_at=days_ago(10))
    for conversation in (old, old, long_open, recent, ended_recently):
        TurnFactory(conversation=conversation)
    Sighting.objects.create(person=anna, room=hall, seen_at=days_ago(31))
    Sighting.objects.create(person=anna, room=hall, seen_at=days_ago(29))
    Event.objects.create(kind="door.opened", occurred_at=days_ago(91))
    Event.objects.create(kind="door.opened", occurred_at=days_ago(89))
    memory = MemoryFactory(content="Der Schlüssel ist in der Dose.", source_ref=f"conversation:{old.pk}")
    return {"old": old, "long_open": long_open, "recent": recent, "ended_recently": ended_recently, "memory": memory}


def test_purge_deletes_what_is_past_retention_and_keeps_memories(household):
    counts = transcripts_purge()
    assert counts == {"conversations": 2, "turns": 3, "sightings": 1, "events": 1}
    assert set(Conversation.objects.all()) == {household["recent"], household["ended_recently"]}
    assert Turn.objects.count() == 2 and Sighting.objects.count() == 1 and Event.objects.count() == 1
    memory = Memory.objects.visible_to(speaker=None, room=None).active().get()
    assert memory == household["memory"] and memory.source_ref == f"conversation:{household['old'].pk}"
    assert transcripts_purge() == {"conversations": 0, "turns": 0, "sightings": 0, "events": 0}


def test_the_admins_retention_days_count(household):
    Household.objects.update_or_create(
        pk=1, defaults={"transcript_retention_days": 5, "sighting_retention_days": 60, "event_retention_days": 60}
    )
    assert transcripts_purge(dry_run=True) == {"conversations": 4, "turns": 5, "sightings": 0, "events": 2}


def test_a_dry_run_deletes_nothing(household):
    assert transcripts_purge(dry_run=True)["conversations"] == 2
    assert Conversation.objects.count() == 4 and Sighting.objects.count() == 2


def test_the_command_shows_progress_and_has_a_dry_run(household):
    out = StringIO()
    call_command("purge_transcripts", "--dry-run", stdout=out)
    assert "Dry run: would delete 2 conversations (3 turns), 1 sightings, 1 events" in out.getvalue()
    assert Conversation.objects.count() == 4
    out = StringIO()
    call_command("purge_transcripts", "--batch-size", "1", stdout=out)
    text = out.getvalue()
    assert "conversations: 1/2 (50%)" in text and "conversations: 2/2 (100%)" in text
    assert "Deleted 2 conversations (3 turns), 1 sightings, 1 events." in text
    assert Conversation.objects.count() == 2


def test_the_daily_job_purges(household):
    assert transcripts_purge_job()["conversations"] == 2


def test_overlapping_runs_are_refused(household):
    held, release = threading.Event(), threading.Event()

    def other_purge():
        connection = connections.create_connection("default")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LockId.PURGE])
            held.set()
            release.wait(10)
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LockId.PURGE])
        connection.close()

    thread = threading.Thread(target=other_purge)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(ApplicationError) as error:
            transcripts_purge()
        assert error.value.status == 409
        with pytest.raises(CommandError, match="Another purge is running"):
            call_command("purge_transcripts", stdout=StringIO())
    finally:
        release.set()
        thread.join(10)
    assert Conversation.objects.count() == 4
