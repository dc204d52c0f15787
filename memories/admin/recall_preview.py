"""The recall preview page of the memory admin: what the assistant would get for a question."""

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.template.response import TemplateResponse
from django.urls import path

from justai_memory.errors import ApplicationError
from memories.admin.forms import RecallPreviewForm
from memories.selectors.recall import memory_recall


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
        result = None
        if form.is_valid():
            data = form.cleaned_data
            try:
                # The preview changes nothing: access counts and the audit trail are rolled back.
                with transaction.atomic():
                    result = memory_recall(
                        query=data["query"],
                        speaker=data["speaker"],
                        room=data["room"],
                        conversation=data["conversation"],
                        limit=data["limit"],
                    )
                    transaction.set_rollback(True)
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
        }
        return TemplateResponse(request, "admin/memories/memory/recall_preview.html", context)
