"""The embedding space the stored vectors belong to: which embedder made them, checked once per process.

Reads (and, on first use, records the configured embedder in ``EmbeddingSpace``); selectors and
services both ask it for ``active_embedder``. Switching to another embedder is
``memories.services.embeddings.memories_reembed``.
"""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from memories.embedders import Embedder, configured_dim, get_embedder
from memories.models import EmbeddingSpace

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
