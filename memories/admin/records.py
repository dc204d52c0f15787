"""Text-free records, read only: the audit trail and the embedding space."""

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from memories.admin.base import RecordAdmin, actor_name
from memories.models import AuditEvent, EmbeddingSpace


@admin.register(AuditEvent)
class AuditEventAdmin(RecordAdmin):
    """What happened to memory N, never what it said."""

    list_display = ["created_at", "memory", "action", "related", "count", "by"]
    list_filter = ["action", "created_at"]
    search_fields = ["=memory_id", "=related_memory_id", "actor"]
    search_help_text = _("A memory id, or an actor such as admin:1, tool, job:memory.consolidate.")

    @admin.display(description=_("memory"), ordering="memory_id")
    def memory(self, obj):
        return f"#{obj.memory_id}"

    @admin.display(description=_("by"), ordering="actor")
    def by(self, obj):
        return actor_name(obj.actor)

    @admin.display(description=_("related memory"))
    def related(self, obj):
        return f"#{obj.related_memory_id}" if obj.related_memory_id else ""


@admin.register(EmbeddingSpace)
class EmbeddingSpaceAdmin(RecordAdmin):
    """Which embedder the vectors belong to; changed only by `manage.py reembed_memories`."""

    list_display = ["embedder", "dim", "updated_at"]
