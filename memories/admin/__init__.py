"""The household's admin for memories, one module per model admin (as ``django.contrib.auth.admin``).

Importing the package registers every model admin: memories (search by meaning, edit, notes,
recall preview), forget blocks, consolidation runs, settings and the text-free records.
"""

from memories.admin.consolidation import ConsolidationRunAdmin
from memories.admin.memory import MemoryAdmin
from memories.admin.records import AuditEventAdmin, EmbeddingSpaceAdmin
from memories.admin.tombstone import TombstoneAdmin

__all__ = [
    "AuditEventAdmin",
    "ConsolidationRunAdmin",
    "EmbeddingSpaceAdmin",
    "MemoryAdmin",
    "TombstoneAdmin",
]
