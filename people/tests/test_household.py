"""The household settings row: one row, positive retention, its admin page, and the move from memories."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from people.models import Household

pytestmark = pytest.mark.django_db

BEFORE = [("memories", "0011_tombstone_room_protect"), ("people", "0002_household")]
AFTER = [("memories", "0012_household_settings_to_people")]


def test_there_is_one_row_with_the_defaults():
    row = Household.load()
    assert (row.pk, row.personal_memories_to_cloud, row.transcript_retention_days) == (1, False, 365)
    with transaction.atomic(), pytest.raises(IntegrityError):
        Household.objects.create(pk=2)
    with transaction.atomic(), pytest.raises(IntegrityError):
        Household.objects.filter(pk=1).update(sighting_retention_days=0)


def test_the_settings_list_is_the_one_settings_page(admin_client):
    response = admin_client.get(reverse("admin:people_household_changelist"))
    assert response.status_code == 302
    assert response.url == reverse("admin:people_household_change", args=[1])
    html = admin_client.get(response.url).content.decode()
    assert "personal_memories_to_cloud" in html and "transcript_retention_days" in html


def test_saving_the_settings_changes_the_cloud_flag_and_the_retention(admin_client):
    Household.load()
    url = reverse("admin:people_household_change", args=[1])
    response = admin_client.post(
        url,
        {
            "personal_memories_to_cloud": "on",
            "transcript_retention_days": 30,
            "sighting_retention_days": 7,
            "event_retention_days": 14,
        },
    )
    assert response.status_code == 302 and response.url == url
    row = Household.load()
    assert (row.personal_memories_to_cloud, row.transcript_retention_days) == (True, 30)


def test_settings_can_be_neither_added_nor_deleted(admin_client):
    Household.load()
    assert admin_client.get(reverse("admin:people_household_add")).status_code == 403
    assert admin_client.post(reverse("admin:people_household_delete", args=[1]), {"post": "yes"}).status_code == 403
    assert Household.objects.count() == 1


def test_zero_retention_days_are_refused(admin_client):
    Household.load()
    url = reverse("admin:people_household_change", args=[1])
    response = admin_client.post(
        url, {"transcript_retention_days": 0, "sighting_retention_days": 7, "event_retention_days": 14}
    )
    assert response.status_code == 200 and Household.load().transcript_retention_days == 365


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_the_values_of_the_memories_settings_row():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old_state = executor.loader.project_state(BEFORE).apps
        old_state.get_model("memories", "MemorySettings").objects.create(
            pk=1,
            personal_memories_to_cloud=True,
            transcript_retention_days=30,
            sighting_retention_days=7,
            event_retention_days=14,
        )
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        row = executor.loader.project_state(AFTER).apps.get_model("people", "Household").objects.get()
        assert (
            row.personal_memories_to_cloud,
            row.transcript_retention_days,
            row.sighting_retention_days,
            row.event_retention_days,
        ) == (True, 30, 7, 14)
        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE)  # and back: the values return to memories
        back = executor.loader.project_state(BEFORE).apps.get_model("memories", "MemorySettings").objects.get()
        assert (back.personal_memories_to_cloud, back.transcript_retention_days) == (True, 30)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
