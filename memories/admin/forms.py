"""Forms of the memories admin: edit, add a note, preview recall. Rules stay in the services they call."""

from django import forms

from memories.limits import MAX_TEXT_CHARS
from memories.models import Memory
from memories.scopes import scope_holders
from memories.selectors.privacy import LOCAL, MODEL_LOCATIONS
from memories.services.edit import EDITABLE_FIELDS
from people.models import Person, Room
from transcripts.models import Conversation


class ScopeFormMixin:
    """Clear owner and room where the scope has none, so switching scope needs one change, not three."""

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("scope"):
            cleaned["owner"], cleaned["room"] = scope_holders(
                scope=cleaned["scope"], owner=cleaned.get("owner"), room=cleaned.get("room")
            )
        return cleaned


class MemoryChangeForm(ScopeFormMixin, forms.ModelForm):
    class Meta:
        model = Memory
        fields = EDITABLE_FIELDS


class MemoryNoteForm(ScopeFormMixin, forms.ModelForm):
    """Add a note (kind note, source admin, confirmed); ``memory_note_add`` refuses one a forget block covers."""

    class Meta:
        model = Memory
        fields = ["content", "language", "scope", "owner", "room", "about", "importance"]
        widgets = {"content": forms.Textarea(attrs={"rows": 4, "maxlength": MAX_TEXT_CHARS})}
        help_texts = {"language": "Leave empty to detect it from the text."}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["language"].required = False


class RecallPreviewForm(forms.Form):
    speaker = forms.ModelChoiceField(
        Person.objects.all(), required=False, empty_label="unknown speaker", help_text="Who asks."
    )
    room = forms.ModelChoiceField(Room.objects.all(), help_text="Where the question is asked.")
    query = forms.CharField(
        label="Question", max_length=MAX_TEXT_CHARS, widget=forms.TextInput(attrs={"size": 80, "autofocus": True})
    )
    model_location = forms.ChoiceField(
        choices=[(location, location) for location in MODEL_LOCATIONS],
        initial=LOCAL,
        help_text="Where the model that reads the answer runs (the cloud rule applies to cloud).",
    )
    conversation = forms.IntegerField(
        required=False,
        min_value=1,
        help_text="Optional conversation id: its language and model location apply (cloud if either says so), "
        "and its working memory is shown to users who may view conversations.",
    )
    limit = forms.IntegerField(min_value=1, max_value=50, initial=10)

    def clean_conversation(self):
        pk = self.cleaned_data.get("conversation")
        if pk is None:
            return None
        try:
            return Conversation.objects.get(pk=pk)
        except Conversation.DoesNotExist:
            raise forms.ValidationError(f"No conversation with id {pk}.") from None
