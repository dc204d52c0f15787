"""The household's admin for transcripts, one module per part (as ``memories.admin``).

Importing the package registers every model admin: conversations with their turns (read-only, ``conversation``;
re-running their extraction, ``rerun``; its outcome in words, ``extraction``), sightings and events (``records``).
"""

from transcripts.admin.conversation import ConversationAdmin
from transcripts.admin.records import EventAdmin, SightingAdmin

__all__ = ["ConversationAdmin", "EventAdmin", "SightingAdmin"]
