"""Forget blocks, without text: who, which scope, when. Lifting one lets its content be stored again."""

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

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
        "blocked_count",
        "last_blocked_at",
    ]
    list_filter = ["scope", "embedder"]
    list_select_related = ["owner", "room", "forgotten_by_person", "forgotten_by_user"]
    date_hierarchy = "forgotten_at"
    # The digests and word marks are no text, but their numbers mean nothing to a family: the page says
    # what a block is instead.
    exclude = ["embedding", "digests", "word_marks"]
    readonly_fields = ["what_it_is"]
    actions = [lift_blocks]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    @admin.display(description=_("what it is"))
    def what_it_is(self, obj) -> str:
        """The block in words (its digests and word marks are keyed hashes, docs/privacy.md)."""
        return _(
            "What is left of a forgotten memory: no text, only a fingerprint of its meaning and keyed digests "
            "of its numbers and rare words. It keeps that content from being stored again."
        )

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # replaced by lift_blocks, which says what deleting a block means
        return actions

    def delete_model(self, request, obj):
        tombstone_lift(tombstone_ids=[obj.pk], actor=Actor.admin(request.user))

    def delete_queryset(self, request, queryset):
        tombstone_lift(tombstone_ids=list(queryset.values_list("pk", flat=True)), actor=Actor.admin(request.user))

    def response_delete(self, request, obj_display, obj_id):
        """Lifting is not deleting: the message says what it means, and the list of blocks follows."""
        message = ngettext(
            "Lifted %(n)d forget block: its content may be remembered again.",
            "Lifted %(n)d forget blocks: their content may be remembered again.",
            1,
        )
        self.message_user(request, message % {"n": 1}, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:memories_tombstone_changelist"))
