from django.contrib.postgres.fields import ArrayField
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils.translation import gettext_lazy as _

LANGUAGE_CODE_REGEX = r"^[a-z]{2,3}$"


class Person(models.Model):
    """A member of the household whom the assistant can recognise as a speaker."""

    name = models.CharField(max_length=100, verbose_name=_("name"))
    aliases = ArrayField(models.CharField(max_length=100), blank=True, default=list, verbose_name=_("aliases"))
    preferred_language = models.CharField(
        max_length=8,
        default="en",
        help_text=_("ISO 639-1 code, e.g. de, it, en."),
        verbose_name=_("preferred language"),
    )
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("added at"))

    class Meta:
        ordering = ["name"]
        verbose_name = _("person")
        verbose_name_plural = _("people")
        constraints = [
            models.UniqueConstraint(Lower("name"), name="person_name_unique_ci"),
            models.CheckConstraint(condition=~models.Q(name=""), name="person_name_not_empty"),
            models.CheckConstraint(
                condition=models.Q(preferred_language__regex=LANGUAGE_CODE_REGEX), name="person_language_iso_code"
            ),
        ]

    def __str__(self):
        return self.name


class Room(models.Model):
    """A room of the household; room-scoped memories are only relevant there."""

    name = models.CharField(max_length=100, verbose_name=_("name"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("added at"))

    class Meta:
        ordering = ["name"]
        verbose_name = _("room")
        verbose_name_plural = _("rooms")
        constraints = [
            models.UniqueConstraint(Lower("name"), name="room_name_unique_ci"),
            models.CheckConstraint(condition=~models.Q(name=""), name="room_name_not_empty"),
        ]

    def __str__(self):
        return self.name


class Household(models.Model):
    """The household's admin-editable settings (one row): what may reach the cloud, how long records are kept.

    At the bottom layer so that memories (the cloud rule) and transcripts (retention) both read it.
    """

    personal_memories_to_cloud = models.BooleanField(
        default=False,
        help_text=_("Allow memories to reach cloud models (recall for cloud conversations, cloud extraction)."),
        verbose_name=_("personal memories to cloud models"),
    )
    redact_forgotten_in_transcripts = models.BooleanField(
        default=True,
        help_text=_(
            "When something is forgotten, replace its values (numbers, codes, dates, rare words) by "
            "'[forgotten]' in the kept transcripts that restate it. Off: transcripts stay as said until retention."
        ),
        verbose_name=_("redact forgotten values in transcripts"),
    )
    transcript_retention_days = models.PositiveIntegerField(
        default=365, validators=[MinValueValidator(1)], verbose_name=_("keep transcripts (days)")
    )
    sighting_retention_days = models.PositiveIntegerField(
        default=30, validators=[MinValueValidator(1)], verbose_name=_("keep sightings (days)")
    )
    event_retention_days = models.PositiveIntegerField(
        default=90, validators=[MinValueValidator(1)], verbose_name=_("keep events (days)")
    )

    class Meta:
        verbose_name = verbose_name_plural = _("household settings")
        constraints = [
            models.CheckConstraint(condition=models.Q(pk=1), name="household_singleton"),
            models.CheckConstraint(
                condition=models.Q(
                    transcript_retention_days__gte=1, sighting_retention_days__gte=1, event_retention_days__gte=1
                ),
                name="household_retention_positive",
            ),
        ]

    def __str__(self):
        return str(_("household settings"))

    @classmethod
    def load(cls) -> "Household":
        return cls.objects.get_or_create(pk=1)[0]
