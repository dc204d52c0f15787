from django.contrib import admin

from memories.models import AuditEvent, ConsolidationRun, EmbeddingSpace, Memory, MemorySettings, Tombstone


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ["id", "content", "kind", "provenance", "scope", "owner", "room", "language", "status"]
    list_filter = ["kind", "provenance", "scope", "status", "language"]
    search_fields = ["content"]
    exclude = ["embedding"]
    readonly_fields = ["access_count", "last_accessed_at", "created_at", "updated_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")


@admin.register(Tombstone)
class TombstoneAdmin(admin.ModelAdmin):
    list_display = ["id", "scope", "owner", "room", "embedder", "forgotten_at"]
    exclude = ["embedding"]


admin.site.register(AuditEvent)
admin.site.register(ConsolidationRun)
admin.site.register(EmbeddingSpace)
admin.site.register(MemorySettings)
