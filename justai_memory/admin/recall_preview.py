"""The recall preview page of the memory admin: what the assistant would get for a question.

In the wiring layer because it answers as the API does, which puts two apps together: recall
(memories) and the conversation's working memory (transcripts). It extends the memories app's
MemoryAdmin, registered again here with the page added (``admin:memories_memory_recall_preview``).
"""

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.translation import gettext_lazy as _

from justai_core.errors import ApplicationError
from justai_core.locations import LOCAL, MODEL_LOCATIONS, ModelLocation
from justai_memory.admin.trail import TrailMixin
from justai_memory.api.caller import caller_resolve
from memories.admin.base import language_words
from memories.admin.filters import label_name
from memories.admin.memory import MemoryAdmin
from memories.limits import MAX_TEXT_CHARS
from memories.models import Memory, Scope
from memories.services.recall import memory_recall
from people.models import Person, Room
from transcripts.models import Conversation
from transcripts.selectors import working_memory

# The resolver names the API's fields; the form has the objects' names.
FORM_FIELD = {"room_id": "room", "speaker_id": "speaker", "conversation_id": "conversation"}
# Turns are conversation content: only who may read conversations in the admin sees them here.
VIEW_CONVERSATIONS = "transcripts.view_conversation"


class RecallPreviewForm(forms.Form):
    speaker = forms.ModelChoiceField(
        Person.objects.all(),
        label=_("Speaker"),
        required=False,
        empty_label=_("unknown speaker"),
        help_text=_("Who asks."),
    )
    room = forms.ModelChoiceField(Room.objects.all(), label=_("Room"), help_text=_("Where the question is asked."))
    query = forms.CharField(
        label=_("Question"), max_length=MAX_TEXT_CHARS, widget=forms.TextInput(attrs={"size": 80, "autofocus": True})
    )
    model_location = forms.ChoiceField(
        choices=[(location, ModelLocation(location).label) for location in MODEL_LOCATIONS],
        initial=LOCAL,
        label=_("Model location"),
        help_text=_("Where the model that reads the answer runs (the cloud rule applies to cloud)."),
    )
    conversation = forms.IntegerField(
        required=False,
        min_value=1,
        label=_("Conversation"),
        help_text=_(
            "Optional conversation id: its language and model location apply (cloud if either says so), "
            "and its working memory is shown to users who may view conversations."
        ),
    )
    limit = forms.IntegerField(
        label=_("Limit"),
        min_value=1,
        max_value=50,
        initial=10,
        help_text=_(
            "How many memories recall picks by the question; up to 3 memories about a known speaker come on top."
        ),
    )

    def clean_conversation(self):
        pk = self.cleaned_data.get("conversation")
        if pk is None:
            return None
        try:
            return Conversation.objects.get(pk=pk)
        except Conversation.DoesNotExist:
            raise forms.ValidationError(f"No conversation with id {pk}.") from None


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
                caller = caller_resolve(
                    room=data["room"],
                    speaker=data["speaker"],
                    conversation=conversation,
                    model_location=data["model_location"],
                )
                # The preview changes nothing: access counts and the audit trail are rolled back.
                with transaction.atomic():
                    result = memory_recall(query=data["query"], caller=caller, limit=data["limit"])
                    transaction.set_rollback(True)
                if conversation is not None and may_read_turns:
                    turns = working_memory(conversation=conversation)
            except ApplicationError as exc:
                result = None
                field = FORM_FIELD.get(exc.field, exc.field)
                form.add_error(field if field in form.fields else None, exc.message)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": _("Recall preview"),
            "form": form,
            "result": result,
            "rows": result.memories if result else None,
            # Each row with its label, scope and language in the page's words (the row holds the codes).
            "table": [
                (m, label_name(m.provenance), Scope(m.scope).label, language_words(m.language))
                for m in (result.memories if result else [])
            ],
            "working_memory": turns,
            "turns_hidden": bool(result and data["conversation"] and not may_read_turns),
        }
        return TemplateResponse(request, "admin/memories/memory/recall_preview.html", context)


admin.site.unregister(Memory)


@admin.register(Memory)
class MemoryWithPreviewAdmin(TrailMixin, RecallPreviewMixin, MemoryAdmin):
    """The memories app's MemoryAdmin, the recall preview page and the provenance trail."""
