"""Which embedder the stored vectors belong to, and switching to another one (re-embedding)."""

import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from memories.embedders import Embedder, configured_dim, embedder_by_name, get_embedder, vector_literal
from memories.locks import LockId, advisory_xact_lock
from memories.models import EmbeddingSpace, Memory, Tombstone

logger = logging.getLogger(__name__)

EMBEDDER_MISMATCH = (
    "The database holds vectors of the embedder '{stored}' ({stored_dim}-d), but MEMORY_EMBEDDER is "
    "'{configured}' ({configured_dim}-d). Run `python manage.py reembed_memories` to re-embed every "
    "memory with '{configured}', or set MEMORY_EMBEDDER={stored} again."
)
COLUMN_MISMATCH = (
    "The database's vector column is {column_dim}-d, but MEMORY_EMBEDDER '{configured}' makes "
    "{configured_dim}-d vectors. Run `python manage.py reembed_memories` to convert it."
)

_verified: set[tuple[str, str]] = set()


class EmbedderMismatch(ImproperlyConfigured):
    pass


def embedding_column_dim() -> int | None:
    """The dimension of memories_memory.embedding as the database has it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories_memory'::regclass AND attname = 'embedding'"
        )
        row = cursor.fetchone()
    return row[0] if row and row[0] > 0 else None


def embedding_space_verify() -> EmbeddingSpace:
    """Record the configured embedder on first use; refuse (EmbedderMismatch) when the database holds another one."""
    name, dim = settings.MEMORY_EMBEDDER, configured_dim()
    space = EmbeddingSpace.objects.filter(pk=1).first()
    if space is None:
        column_dim = embedding_column_dim()
        if column_dim is not None and column_dim != dim:
            raise EmbedderMismatch(COLUMN_MISMATCH.format(column_dim=column_dim, configured=name, configured_dim=dim))
        space, _ = EmbeddingSpace.objects.get_or_create(pk=1, defaults={"embedder": name, "dim": dim})
    if space.embedder != name or space.dim != dim:
        raise EmbedderMismatch(
            EMBEDDER_MISMATCH.format(stored=space.embedder, stored_dim=space.dim, configured=name, configured_dim=dim)
        )
    return space


def active_embedder() -> Embedder:
    """The configured embedder, once verified against the database for this process and database."""
    key = (settings.MEMORY_EMBEDDER, connection.settings_dict["NAME"])
    if key not in _verified:
        embedding_space_verify()
        _verified.add(key)
    return get_embedder()


def forget_verification() -> None:
    """Forget which embedders were verified (tests, and after re-embedding)."""
    _verified.clear()


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


def memories_reembed(*, batch_size: int = 256, progress: Callable[[int, int], None] | None = None) -> dict:
    """Re-embed every memory with the configured embedder, in one transaction; tombstones keep their vectors.

    Tombstones hold no text, so they cannot be re-embedded. Each keeps the vector and the name of
    the embedder that made it, and the store path checks new content against it with that same
    embedder (see selectors.tombstones). So every forget block keeps working after a switch.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1.")
    target = get_embedder()
    tombstone_embedders = tombstone_embedders_check()
    total = Memory.objects.count()
    done = 0
    with transaction.atomic():
        if not advisory_xact_lock(LockId.REEMBED):
            raise ImproperlyConfigured("Another re-embedding is running.")
        old_dim = embedding_column_dim()
        index = next(i for i in Memory._meta.indexes if i.name == "memory_embedding_hnsw")
        with connection.schema_editor(atomic=False) as editor:
            editor.remove_index(Memory, index)
            if old_dim != target.dim:
                editor.execute("ALTER TABLE memories_memory ALTER COLUMN embedding DROP NOT NULL")
                editor.execute(
                    f"ALTER TABLE memories_memory ALTER COLUMN embedding TYPE vector({int(target.dim)}) USING NULL"
                )
        ids = list(Memory.objects.order_by("pk").values_list("pk", flat=True))
        for start in range(0, len(ids), batch_size):
            chunk = ids[start : start + batch_size]
            rows = list(Memory.objects.filter(pk__in=chunk).order_by("pk").values_list("pk", "content"))
            vectors = target.embed_documents([content for _, content in rows])
            with connection.cursor() as cursor:
                cursor.executemany(
                    "UPDATE memories_memory SET embedding = %s::vector WHERE id = %s",
                    [(vector_literal(v), pk) for (pk, _), v in zip(rows, vectors, strict=True)],
                )
            done += len(rows)
            if progress:
                progress(done, total)
        with connection.schema_editor(atomic=False) as editor:
            if old_dim != target.dim:
                editor.execute("ALTER TABLE memories_memory ALTER COLUMN embedding SET NOT NULL")
            editor.add_index(Memory, index)
        EmbeddingSpace.objects.update_or_create(pk=1, defaults={"embedder": target.name, "dim": target.dim})
    forget_verification()
    logger.info("re-embedded %d memories with %s", done, target.name)
    return {"embedder": target.name, "dim": target.dim, "reembedded": done, "tombstone_embedders": tombstone_embedders}
