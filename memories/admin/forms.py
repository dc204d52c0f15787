"""Forms of the memories admin: edit, add a note. Rules stay in the services they call."""

from django import forms
from django.utils.translation import gettext_lazy as _

from memories.limits import MAX_TEXT_CHARS
from memories.models import Memory
from memories.scopes import scope_holders
from memories.services.edit import EDITABLE_FIELDS


class ScopeFormMixin:
    """Clear owner and room where the scope has none, so switching scope needs one change, not three."""

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("scope"):
            cleaned["owner"], cleaned["room"] = scope_holders(
                scope=cleaned["scope"], owner=cleaned.get("owner"), room=cleaned.get("room")
            )
        return cleaned


# The labels of the fields an admin fills in, in the admin's language (the model's field names are English).
LABELS = {
    "content": _("Content"),
    "language": _("Language"),
    "kind": _("Kind"),
    "provenance": _("Provenance"),
    "confidence": _("Confidence"),
    "importance": _("Importance"),
    "scope": _("Scope"),
    "owner": _("Owner"),
    "room": _("Room"),
    "about": _("About"),
    "subject": _("Subject"),
    "predicate": _("Predicate"),
    "valid_at": _("Valid at"),
}


class MemoryChangeForm(ScopeFormMixin, forms.ModelForm):
    class Meta:
        model = Memory
        fields = EDITABLE_FIELDS
        labels = LABELS


class MemoryNoteForm(ScopeFormMixin, forms.ModelForm):
    """Add a note (kind note, source admin, confirmed); ``memory_note_add`` refuses one a forget block covers."""

    class Meta:
        model = Memory
        fields = ["content", "language", "scope", "owner", "room", "about", "importance"]
        widgets = {"content": forms.Textarea(attrs={"rows": 4, "maxlength": MAX_TEXT_CHARS})}
        help_texts = {"language": _("Leave empty to detect it from the text.")}
        labels = LABELS

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["language"].required = False
        # Empty, not the model's default "en": an empty language is detected from the text.
        self.initial["language"] = ""
