"""Recalls per day (RecallDay): one per recall, in the statement that loads it, no text; the preview and a
withheld recall count nothing; consolidation drops days over RECALL_DAYS_KEPT ago; the migration applies."""

import threading
from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from memories.caller import Caller
from memories.models import RECALL_DAYS_KEPT, RecallDay
from memories.services import access
from memories.services.consolidate import memories_consolidate
from memories.services.recall import memory_recall
from memories.tests.factories import MemoryFactory
from people.tests.factories import RoomFactory

pytestmark = pytest.mark.django_db

BUMP = "WITH bump AS (INSERT INTO memories_memoryaccess"


def recall(query, *, room, **kwargs):
    caller = Caller(room=room, speaker=None, model_location=kwargs.pop("model_location", "local"))
    return memory_recall(query=query, caller=caller, **kwargs)


def counts() -> dict[date, int]:
    return dict(RecallDay.objects.values_list("day", "count"))


def test_every_recall_counts_once_on_its_day_found_or_not_in_the_statement_that_loads_it():
    room = RoomFactory()
    assert recall("cellar key", room=room).memories == []  # nothing to find: still a recall
    MemoryFactory(content="The cellar key is in the blue tin")
    with CaptureQueriesContext(connection) as queries:
        found = recall("cellar key", room=room)
    assert found.memories
    [statement] = [q["sql"] for q in queries.captured_queries if "memories_recallday" in q["sql"]]
    assert statement.startswith(BUMP)  # the access bump's statement, not one more round trip
    assert not [q for q in queries.captured_queries if "INSERT" in q["sql"] and q["sql"] != statement]

    recall("cellar key", room=room)
    assert counts() == {timezone.localdate(): 3}


def test_the_day_is_the_households_time_zone(settings, monkeypatch):
    settings.TIME_ZONE = "Europe/Berlin"
    room = RoomFactory()
    MemoryFactory(content="The cellar key is in the blue tin")
    # 23:30 UTC on 1 March is 00:30 on 2 March in Berlin.
    monkeypatch.setattr(access.timezone, "now", lambda: datetime(2026, 3, 1, 23, 30, tzinfo=UTC))
    recall("cellar key", room=room)
    assert counts() == {date(2026, 3, 2): 1}


def test_a_withheld_recall_and_one_without_record_access_count_nothing():
    room = RoomFactory()
    MemoryFactory(content="The cellar key is in the blue tin")
    assert recall("cellar key", room=room, model_location="cloud").withheld
    assert recall("cellar key", room=room, record_access=False).memories
    assert counts() == {}


def test_the_admins_recall_preview_counts_nothing_like_the_access_counts(admin_client):
    room = RoomFactory()
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    page = admin_client.get(
        reverse("admin:memories_memory_recall_preview"),
        {"query": "cellar key", "room": room.pk, "speaker": "", "limit": 10, "model_location": "local"},
    )
    assert page.status_code == 200 and "blue tin" in page.content.decode()
    memory.refresh_from_db()
    assert counts() == {} and memory.access_count == 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_recalls_on_a_new_day_are_all_counted():
    room = RoomFactory()
    MemoryFactory(content="The cellar key is in the blue tin")
    MemoryFactory(content="The cellar door sticks in winter")
    start = threading.Barrier(4)
    errors = []

    def recalls():
        try:
            start.wait(timeout=30)
            for _ in range(10):
                recall("cellar", room=room)
        except Exception as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=recalls) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and counts() == {timezone.localdate(): 40}


def test_consolidation_drops_recall_days_older_than_kept_and_no_other():
    today = timezone.localdate()
    old, kept = today - timedelta(days=RECALL_DAYS_KEPT + 1), today - timedelta(days=RECALL_DAYS_KEPT)
    RecallDay.objects.bulk_create(RecallDay(day=day, count=4) for day in (old, kept, today))
    memories_consolidate(started_by="test")
    assert counts() == {kept: 4, today: 4}


@pytest.mark.django_db(transaction=True)
def test_the_migration_adds_the_table_and_goes_back():
    before, after = [("memories", "0016_verbose_names")], [("memories", "0017_recall_day")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        assert "memories_recallday" not in connection.introspection.table_names()
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        day = executor.loader.project_state(after).apps.get_model("memories", "RecallDay")
        day.objects.create(day=date(2026, 12, 2), count=1)
        with connection.cursor() as cursor:
            cursor.execute(access.COUNT_RECALL_SQL.format(asynchronous=""), [date(2026, 12, 2)])
        assert day.objects.get().count == 2
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_access_upsert_takes_its_rows_in_ascending_memory_id():
    """Two recalls bumping the same memories lock their rows in one order: they wait for each other, no deadlock."""
    now = timezone.now()
    _sql, (ids, counts, _times) = access._upsert([(30, 1, now), (10, 2, now), (20, 3, now)])
    assert ids == [10, 20, 30] and counts == [2, 3, 1]
