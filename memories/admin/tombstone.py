"""Forget blocks, without text: who, which scope, when. Lifting one lets its content be stored again."""

from django.contrib import admin

from memories.actors import Actor
from memories.admin.actions import lift_blocks
from memories.admin.base import RecordAdmin
from memories.models import Tombstone
from memories.services.forget import tombstone_lift


@admin.register(Tombstone)
class TombstoneAdmin(RecordAdmin):
    deletable = True  # deleting a block is lifting it
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
    actions = [lift_blocks]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # replaced by lift_blocks, which says what deleting a block means
        return actions

    def delete_model(self, request, obj):
        tombstone_lift(tombstone_ids=[obj.pk], actor=Actor.admin(request.user))

    def delete_queryset(self, request, queryset):
        tombstone_lift(tombstone_ids=list(queryset.values_list("pk", flat=True)), actor=Actor.admin(request.user))
