from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from memories.models import AuditEvent, ConsolidationRun, EmbeddingSpace, Memory, MemorySettings, Tombstone
from memories.services.forget import memories_forget, tombstone_lift


def admin_actor(request) -> str:
    return f"admin:{request.user.pk}"


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ["id", "content", "kind", "provenance", "scope", "owner", "room", "language", "status"]
    list_filter = ["kind", "provenance", "scope", "status", "language"]
    search_fields = ["content"]
    exclude = ["embedding"]
    readonly_fields = ["access_count", "last_accessed_at", "created_at", "updated_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    # Deleting in the admin is forgetting: a text-less tombstone stays and blocks the content's return.
    def delete_model(self, request, obj):
        memories_forget(memory_ids=[obj.pk], actor=admin_actor(request), by_user=request.user)

    def delete_queryset(self, request, queryset):
        memories_forget(
            memory_ids=list(queryset.values_list("pk", flat=True)), actor=admin_actor(request), by_user=request.user
        )


@admin.register(Tombstone)
class TombstoneAdmin(admin.ModelAdmin):
    """Forget blocks, without text: who, which scope, when. Lifting one lets its content be stored again."""

    list_display = [
        "id",
        "scope",
        "owner",
        "room",
        "forgotten_at",
        "forgotten_by_person",
        "forgotten_by_user",
        "memory_id",
        "embedder",
    ]
    list_filter = ["scope", "embedder"]
    list_select_related = ["owner", "room", "forgotten_by_person", "forgotten_by_user"]
    date_hierarchy = "forgotten_at"
    exclude = ["embedding"]
    actions = ["lift_blocks"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # replaced by lift_blocks, which says what deleting a block means
        return actions

    def has_add_permission(self, request):
        return False  # blocks come from forgetting, never by hand

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        tombstone_lift(tombstone_ids=[obj.pk], actor=admin_actor(request))

    def delete_queryset(self, request, queryset):
        tombstone_lift(tombstone_ids=list(queryset.values_list("pk", flat=True)), actor=admin_actor(request))

    @admin.action(permissions=["delete"], description="Lift the selected forget blocks")
    def lift_blocks(self, request, queryset):
        if request.POST.get("post"):
            lifted = tombstone_lift(
                tombstone_ids=list(queryset.values_list("pk", flat=True)), actor=admin_actor(request)
            )
            self.message_user(request, f"Lifted {lifted} forget block(s).", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Lift forget blocks",
            "subtitle": None,
            "objects_name": str(self.opts.verbose_name_plural),
            "queryset": queryset,
            "opts": self.opts,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "admin/memories/tombstone/lift_confirmation.html", context)


admin.site.register(AuditEvent)
admin.site.register(ConsolidationRun)
admin.site.register(EmbeddingSpace)
admin.site.register(MemorySettings)
