"""The recall preview page of the memory admin: what the assistant would get for a question."""

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.template.response import TemplateResponse
from django.urls import path

from justai_memory.errors import ApplicationError
from memories.admin.forms import RecallPreviewForm
from memories.selectors.privacy import model_location_of
from memories.selectors.recall import CONVERSATION_OTHER_ROOM, memory_recall
from transcripts.selectors import working_memory

# Turns are conversation content: only who may read conversations in the admin sees them here.
VIEW_CONVERSATIONS = "transcripts.view_conversation"


class RecallPreviewMixin:
    """Adds ``recall-preview/`` to a model admin of memories (view permission)."""

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "recall-preview/",
                self.admin_site.admin_view(self.recall_preview_view),
                name="{}_{}_recall_preview".format(*info),
            ),
            *super().get_urls(),
        ]

    def recall_preview_view(self, request):
        """What the assistant would get for a question: memory_recall, the API's code path, rolled back."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = RecallPreviewForm(request.GET if "query" in request.GET else None)
        result, turns = None, []
        may_read_turns = request.user.has_perm(VIEW_CONVERSATIONS)
        if form.is_valid():
            data = form.cleaned_data
            conversation = data["conversation"]
            try:
                if conversation is not None and conversation.room_id != data["room"].pk:
                    raise ApplicationError(CONVERSATION_OTHER_ROOM, field="conversation")
                # The preview changes nothing: access counts and the audit trail are rolled back.
                with transaction.atomic():
                    result = memory_recall(
                        query=data["query"],
                        speaker=data["speaker"],
                        room=data["room"],
                        model_location=model_location_of(
                            conversation_location=conversation.model_location if conversation else None,
                            model_location=data["model_location"],
                        ),
                        language=conversation.language if conversation else None,
                        limit=data["limit"],
                    )
                    transaction.set_rollback(True)
                if conversation is not None and may_read_turns:
                    turns = working_memory(conversation=conversation)
            except ApplicationError as exc:
                result = None
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Recall preview",
            "form": form,
            "result": result,
            "rows": result.memories if result else None,
            "working_memory": turns,
            "turns_hidden": bool(result and data["conversation"] and not may_read_turns),
        }
        return TemplateResponse(request, "admin/memories/memory/recall_preview.html", context)
