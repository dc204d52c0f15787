"""Re-running a conversation's extraction from the admin: the list's action and the button on its page."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from transcripts.models import Conversation
from transcripts.services import rerun
from transcripts.services.rerun import conversations_extract_rerun


def rerun_refusal_words(reason: str) -> str:
    """Why a re-run was refused, in the page's language (the service's reasons are English constants)."""
    words = {
        rerun.NOT_FOUND: _("no such conversation"),
        rerun.STILL_OPEN: _("still open: it is extracted once it has ended"),
        rerun.BLOCKED: _("speaker deleted: never extracted (it would become shared memories)"),
        rerun.WAITING_LOCAL: _(
            "waiting for a local model: set AI_MEMORY_* to a local provider, or allow personal memories to cloud models"
        ),
        rerun.BUSY: _("already queued or running"),
    }
    return str(words.get(reason, reason))


def conversation_names(ids) -> str:
    """Conversations by who and when (``Conversation.__str__``), as the messages about them name them."""
    found = {c.pk: str(c) for c in Conversation.objects.filter(pk__in=ids).select_related("speaker")}
    return "; ".join(found.get(pk, f"#{pk}") for pk in ids)


class RerunExtraction:
    """The conversation admin's re-run: an action on the list, a POST from the page (``<id>/rerun/``), both guarded by
    the change permission, which is all that permission allows (no conversation is edited). ``super()`` here is
    ``ModelAdmin``'s check: the conversation admin's own refuses every object, so that no page is editable."""

    actions = ["rerun_extraction"]

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<int:conversation_id>/rerun/",
                self.admin_site.admin_view(self.rerun_view),
                name="{}_{}_rerun".format(*info),
            ),
            *super().get_urls(),
        ]

    def render_change_form(self, request, context, *args, **kwargs):
        context["may_rerun"] = super().has_change_permission(request)
        return super().render_change_form(request, context, *args, **kwargs)

    def rerun_view(self, request, conversation_id: int):
        """POST from the conversation's page: the same re-run as the list's action, back to the page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not super().has_change_permission(request):
            raise PermissionDenied
        self.rerun_extraction(request, Conversation.objects.filter(pk=conversation_id))
        return redirect("admin:transcripts_conversation_change", conversation_id)

    @admin.action(description=_("Re-run extraction of the selected conversations"), permissions=["change"])
    def rerun_extraction(self, request, queryset):
        """Reset and queue the extraction of the selected conversations (``conversations_extract_rerun``)."""
        result = conversations_extract_rerun(conversation_ids=list(queryset.values_list("pk", flat=True)))
        if result.queued:
            message = ngettext(
                "Queued extraction for %(n)d conversation: %(ids)s. Any retry it had scheduled was replaced.",
                "Queued extraction for %(n)d conversations: %(ids)s. Any retry they had scheduled was replaced.",
                len(result.queued),
            )
            named = conversation_names(result.queued)
            self.message_user(request, message % {"n": len(result.queued), "ids": named}, messages.SUCCESS)
        by_reason: dict[str, list[int]] = {}
        for pk, reason in sorted(result.refused.items()):
            by_reason.setdefault(reason, []).append(pk)
        for reason, ids in by_reason.items():
            text = gettext("Not queued, %(reason)s: %(ids)s.") % {
                "reason": rerun_refusal_words(reason),
                "ids": conversation_names(ids),
            }
            self.message_user(request, text, messages.WARNING)
