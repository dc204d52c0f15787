from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext_lazy as _

from justai_core.locations import ModelLocation
from memories.models import choices_constraint
from people.models import LANGUAGE_CODE_REGEX


def local_time(moment) -> str:
    """A moment as the active language writes it in the household's time zone ('7.12.2026 10:15')."""
    return date_format(timezone.localtime(moment), "SHORT_DATETIME_FORMAT") if moment else "-"


# What a forget leaves in a kept turn where a forgotten value was (transcripts/services/redaction.py).
FORGOTTEN_MARKER = "[forgotten]"


class ExtractionStatus(models.TextChoices):
    OPEN = "open", _("conversation still open")
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    DONE = "done", _("Done")
    SKIPPED = "skipped", _("Skipped")
    FAILED = "failed", _("Failed")
    WAITING_LOCAL = "waiting_local", _("waiting for a local model")
    WAITING_MODEL = "waiting_model", _("waiting for the model to answer")
    BLOCKED = "blocked", _("blocked (speaker deleted)")


class EndedBy(models.TextChoices):
    ASSISTANT = "assistant", _("the assistant (end)")
    IDLE = "idle", _("the sweep (no new turn for CONVERSATION_IDLE_MINUTES)")


class Conversation(models.Model):
    """A session with the assistant: who spoke (None = unknown), where, in which language."""

    room = models.ForeignKey(
        "people.Room", on_delete=models.PROTECT, related_name="conversations", verbose_name=_("room")
    )
    speaker = models.ForeignKey(
        "people.Person",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="conversations",
        verbose_name=_("speaker"),
    )
    language = models.CharField(max_length=8, default="en", verbose_name=_("language"))
    # No default: whoever starts a conversation says where its model runs (the cloud rule reads it).
    model_location = models.CharField(max_length=8, choices=ModelLocation.choices, verbose_name=_("model runs"))
    started_at = models.DateTimeField(default=timezone.now, verbose_name=_("started"))
    ended_at = models.DateTimeField(null=True, blank=True, verbose_name=_("ended"))
    ended_by = models.CharField(max_length=16, choices=EndedBy.choices, blank=True, verbose_name=_("ended by"))
    extraction_status = models.CharField(
        max_length=16,
        choices=ExtractionStatus.choices,
        default=ExtractionStatus.OPEN,
        verbose_name=_("extraction status"),
    )
    extraction_blocked = models.BooleanField(
        default=False,
        help_text=_("Never extract (its speaker was deleted: it must not become shared memories)."),
        verbose_name=_("never extract"),
    )
    extraction_attempts = models.PositiveIntegerField(default=0, verbose_name=_("extraction attempts"))
    extraction_stats = models.JSONField(default=dict, blank=True, verbose_name=_("extraction stats"))
    extraction_error = models.CharField(max_length=300, blank=True, verbose_name=_("extraction error"))
    extracted_at = models.DateTimeField(null=True, blank=True, verbose_name=_("extracted at"))

    class Meta:
        ordering = ["-started_at"]
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        indexes = [models.Index(fields=["extraction_status", "ended_at"], name="conversation_extraction_idx")]
        constraints = [
            choices_constraint("model_location", ModelLocation, "conversation_model_location_valid"),
            choices_constraint("extraction_status", ExtractionStatus, "conversation_extraction_status_valid"),
            models.CheckConstraint(
                condition=Q(ended_by="") | Q(ended_by__in=EndedBy.values), name="conversation_ended_by_valid"
            ),
            models.CheckConstraint(condition=Q(language__regex=LANGUAGE_CODE_REGEX), name="conversation_language_iso"),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at")),
                name="conversation_ends_after_start",
            ),
        ]

    def __str__(self):
        # Who and when, never what was said: this string lands in Django's admin log.
        who = self.speaker.name if self.speaker_id else _("an unknown speaker")
        return _("Conversation with %(who)s, %(when)s") % {"who": who, "when": local_time(self.started_at)}


class Role(models.TextChoices):
    USER = "user", _("User")
    ASSISTANT = "assistant", _("Assistant")
    SYSTEM = "system", _("System")
    TOOL = "tool", _("Tool")


class Turn(models.Model):
    """One message of a conversation."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="turns", verbose_name=_("conversation")
    )
    role = models.CharField(max_length=16, choices=Role.choices, verbose_name=_("role"))
    speaker = models.ForeignKey(
        "people.Person", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", verbose_name=_("speaker")
    )
    text = models.TextField(verbose_name=_("text"))
    created_at = models.DateTimeField(default=timezone.now, verbose_name=_("at"))
    # Which turns a forget must read: the first 64 bits of the keyed digest of each distinctive token and whole
    # value of the text (memories.digests.token_keys; no text, the key is outside the database). NULL: not read
    # yet (a row made without turns_append); the next forget reads such rows whole and fills their keys.
    token_keys = ArrayField(
        models.BigIntegerField(),
        null=True,
        blank=True,
        help_text=_("Index keys of the keyed digests of the text's values (memories/digests.py); no text."),
        verbose_name=_("value keys"),
    )

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = _("turn")
        verbose_name_plural = _("turns")
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="turn_conversation_time_idx"),
            GinIndex(fields=["token_keys"], name="turn_token_keys_idx"),
            models.Index(fields=["id"], condition=Q(token_keys__isnull=True), name="turn_keys_missing_idx"),
        ]
        constraints = [
            choices_constraint("role", Role, "turn_role_valid"),
            models.CheckConstraint(condition=~Q(text=""), name="turn_text_not_empty"),
        ]

    def __str__(self):
        # Numbered within its conversation where the admin annotates ``position`` (TurnInline), else by id.
        position = getattr(self, "position", None)
        if position is None and self.pk is not None:
            earlier = Q(created_at__lt=self.created_at) | Q(created_at=self.created_at, id__lt=self.pk)
            position = Turn.objects.filter(earlier, conversation_id=self.conversation_id).count() + 1
        return _("Turn %(n)s") % {"n": position}


class Sighting(models.Model):
    """A person seen in a room at a time (time-limited store)."""

    person = models.ForeignKey(
        "people.Person", on_delete=models.CASCADE, related_name="sightings", verbose_name=_("person")
    )
    room = models.ForeignKey("people.Room", on_delete=models.CASCADE, related_name="sightings", verbose_name=_("room"))
    seen_at = models.DateTimeField(default=timezone.now, db_index=True, verbose_name=_("seen at"))

    class Meta:
        ordering = ["-seen_at"]
        verbose_name = _("sighting")
        verbose_name_plural = _("sightings")

    def __str__(self):
        return _("%(person)s in %(room)s, %(when)s") % {
            "person": self.person.name,
            "room": self.room.name,
            "when": local_time(self.seen_at),
        }


class Event(models.Model):
    """Something that happened in the household, from sensors or automations (time-limited store)."""

    kind = models.CharField(max_length=64, verbose_name=_("kind"))
    payload = models.JSONField(default=dict, blank=True, verbose_name=_("payload"))
    room = models.ForeignKey(
        "people.Room", null=True, blank=True, on_delete=models.SET_NULL, related_name="events", verbose_name=_("room")
    )
    person = models.ForeignKey(
        "people.Person",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="events",
        verbose_name=_("person"),
    )
    occurred_at = models.DateTimeField(default=timezone.now, db_index=True, verbose_name=_("occurred at"))

    class Meta:
        ordering = ["-occurred_at"]
        verbose_name = _("event")
        verbose_name_plural = _("events")
        constraints = [models.CheckConstraint(condition=~Q(kind=""), name="event_kind_not_empty")]

    def __str__(self):
        return _("Event “%(kind)s”, %(when)s") % {"kind": self.kind, "when": local_time(self.occurred_at)}
