"""Forget blocks, without text: who, which scope, when. Lifting one lets its content be stored again."""

from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from memories.actors import Actor
from memories.admin.actions import lift_blocks
from memories.admin.base import RecordAdmin, when
from memories.models import Tombstone
from memories.services.forget import tombstone_lift


@admin.register(Tombstone)
class TombstoneAdmin(RecordAdmin):
    deletable = True  # deleting a block is lifting it
    # Few columns, so that the list fits its box on a 1,366 px screen next to the filters.
    list_display = ["id", "whose", "forgotten_at", "forgotten_by", "memory_id", "blocked"]
    list_filter = ["scope", "embedder"]
    list_select_related = ["owner", "room", "forgotten_by_person", "forgotten_by_user"]
    date_hierarchy = "forgotten_at"
    # The digests, word marks and key marks are no text, but their numbers mean nothing to a family: the page says
    # what a block is instead.
    exclude = ["embedding", "digests", "word_marks", "key_marks"]
    readonly_fields = ["what_it_is"]
    actions = [lift_blocks]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding")

    @admin.display(description=_("scope"), ordering="scope")
    def whose(self, obj):
        holder = obj.owner or obj.room
        if holder is None:
            return obj.get_scope_display()
        return format_html("{}<br><small>{}</small>", obj.get_scope_display(), holder)

    @admin.display(description=_("forgotten by"))
    def forgotten_by(self, obj):
        if obj.forgotten_by_person:
            return obj.forgotten_by_person.name
        if obj.forgotten_by_user:
            return gettext("admin %(name)s") % {"name": obj.forgotten_by_user.get_username()}
        return "-"

    @admin.display(description=_("times it blocked"), ordering="blocked_count")
    def blocked(self, obj):
        if not obj.blocked_count:
            return gettext("never")
        return format_html("{}<br><small>{}</small>", obj.blocked_count, when(obj.last_blocked_at))

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
