"""Switching the stored vectors to another embedder (re-embedding); which one they belong to is
``memories.embedding_space``, the one import path of its names."""

import logging
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from memories.embedders import Embedder, embedder_by_name, get_embedder, vector_literal
from memories.embedding_space import embedding_column_dim, forget_verification
from memories.locks import LockId, advisory_lock
from memories.models import EmbeddingSpace, Memory, Tombstone

__all__ = ["memories_reembed", "tombstone_embedders_check"]

logger = logging.getLogger(__name__)


def tombstone_embedders_check() -> list[str]:
    """Load every embedder that tombstones were made with; raise ImproperlyConfigured naming any that cannot load."""
    names = sorted(set(Tombstone.objects.values_list("embedder", flat=True)))
    for name in names:
        try:
            embedder_by_name(name)
        except ImproperlyConfigured as exc:
            raise ImproperlyConfigured(
                f"Forget blocks were made with the embedder '{name}', which cannot be loaded here ({exc}). "
                "Blocks are checked with the embedder that made them, so it must stay loadable."
            ) from exc
    return names


# Re-embedding is resumable: vectors are computed in committed batches into this staging table (which
# memory, with which embedder, for which content), and only the last step, in one transaction, moves
# them into memories_memory. An interrupted run keeps what it staged; the next one embeds the rest.
# A memory edited or added meanwhile (its content no longer matches the staged hash) is embedded in
# the last step. The table exists only while a re-embedding is under way.
STAGING_TABLE = "memories_reembed_staging"


def _staging_ensure(embedder: str, dim: int) -> None:
    """Create the staging table if needed; drop what an earlier run staged for another embedder or dimension."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE IF NOT EXISTS {STAGING_TABLE} (memory_id bigint PRIMARY KEY, "
            "embedder varchar(32) NOT NULL, content_md5 text NOT NULL, embedding vector NOT NULL)"
        )
        cursor.execute(
            f"DELETE FROM {STAGING_TABLE} WHERE embedder <> %s OR vector_dims(embedding) <> %s", [embedder, dim]
        )


def _unstaged(*, after: int, limit: int) -> list[tuple[int, str]]:
    """(id, content) of memories whose current content has no staged vector, from id ``after`` on, by id."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.id, m.content FROM memories_memory m LEFT JOIN {STAGING_TABLE} s "
            "ON s.memory_id = m.id AND s.content_md5 = md5(m.content) "
            "WHERE s.memory_id IS NULL AND m.id > %s ORDER BY m.id LIMIT %s",
            [after, limit],
        )
        return cursor.fetchall()


def _unstaged_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM memories_memory m LEFT JOIN {STAGING_TABLE} s "
            "ON s.memory_id = m.id AND s.content_md5 = md5(m.content) WHERE s.memory_id IS NULL"
        )
        return cursor.fetchone()[0]


def _stage(embedder: Embedder, rows: list[tuple[int, str]]) -> None:
    vectors = embedder.embed_documents([content for _, content in rows])
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {STAGING_TABLE} (memory_id, embedder, content_md5, embedding) "
            "VALUES (%s, %s, md5(%s), %s::vector) ON CONFLICT (memory_id) DO UPDATE "
            "SET embedder = EXCLUDED.embedder, content_md5 = EXCLUDED.content_md5, embedding = EXCLUDED.embedding",
            [(pk, embedder.name, content, vector_literal(v)) for (pk, content), v in zip(rows, vectors, strict=True)],
        )


def _stage_all(embedder: Embedder, *, batch_size: int, on_batch: Callable[[int], None]) -> None:
    after = 0
    while rows := _unstaged(after=after, limit=batch_size):
        _stage(embedder, rows)
        after = rows[-1][0]
        on_batch(len(rows))


def memories_reembed(*, batch_size: int = 256, progress: Callable[[int, int], None] | None = None) -> dict:
    """Re-embed every memory with the configured embedder (resumable); tombstones keep their vectors.

    ``progress(done, total)`` is called after each batch; ``done`` starts at what an interrupted
    run staged already. Tombstones hold no text, so they cannot be re-embedded. Each keeps the
    vector and the name of the embedder that made it, and the store path checks new content against
    it with that same embedder (see selectors.tombstones). So every forget block keeps working after a switch.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1.")
    target = get_embedder()
    tombstone_embedders = tombstone_embedders_check()
    with advisory_lock(LockId.REEMBED) as acquired:
        if not acquired:
            raise ImproperlyConfigured("Another re-embedding is running.")
        _staging_ensure(target.name, target.dim)
        total = Memory.objects.count()
        done = total - _unstaged_count()
        resumed = done

        def on_batch(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, total)

        if progress:
            progress(done, total)
        _stage_all(target, batch_size=batch_size, on_batch=on_batch)  # each batch commits (autocommit)
        with transaction.atomic():
            with connection.cursor() as cursor:  # writers wait from here on; readers until the index is dropped
                cursor.execute("LOCK TABLE memories_memory IN EXCLUSIVE MODE")
            # Memories added or edited since they were staged (another process still serving the old
            # embedder) are embedded here, inside the switch, so none is left with an old vector.
            _stage_all(target, batch_size=batch_size, on_batch=lambda n: None)
            old_dim = embedding_column_dim()
            index = next(i for i in Memory._meta.indexes if i.name == "memory_embedding_hnsw")
            with connection.schema_editor(atomic=False) as editor:
                editor.remove_index(Memory, index)
                if old_dim != target.dim:
                    editor.execute("ALTER TABLE memories_memory ALTER COLUMN embedding DROP NOT NULL")
                    editor.execute(
                        f"ALTER TABLE memories_memory ALTER COLUMN embedding TYPE vector({int(target.dim)}) USING NULL"
                    )
                editor.execute(
                    f"UPDATE memories_memory m SET embedding = s.embedding FROM {STAGING_TABLE} s "
                    "WHERE s.memory_id = m.id AND s.content_md5 = md5(m.content)"
                )
                if old_dim != target.dim:
                    editor.execute("ALTER TABLE memories_memory ALTER COLUMN embedding SET NOT NULL")
                editor.add_index(Memory, index)
                editor.execute(f"DROP TABLE {STAGING_TABLE}")
            EmbeddingSpace.objects.update_or_create(pk=1, defaults={"embedder": target.name, "dim": target.dim})
    forget_verification()
    logger.info("re-embedded %d memories with %s (%d staged by an earlier run)", total, target.name, resumed)
    return {
        "embedder": target.name,
        "dim": target.dim,
        "reembedded": Memory.objects.count(),
        "resumed": resumed,
        "tombstone_embedders": tombstone_embedders,
    }
