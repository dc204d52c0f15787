from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Func, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from pgvector.django import HnswIndex, VectorField

from memories.embedders import configured_dim
from memories.languages import TEXT_SEARCH_CONFIGS
from people.models import LANGUAGE_CODE_REGEX


class Kind(models.TextChoices):
    EPISODE = "episode", _("Episode")
    FACT = "fact", _("Fact")
    PREFERENCE = "preference", _("Preference")
    PROCEDURE = "procedure", _("Procedure")
    NOTE = "note", _("Note")


class Provenance(models.TextChoices):
    CONFIRMED = "confirmed", _("Confirmed")
    OBSERVED = "observed", _("Observed")
    EXTRACTED = "extracted", _("Extracted")
    INFERRED = "inferred", _("Inferred")


# Higher wins when memories merge.
PROVENANCE_RANK = {
    Provenance.CONFIRMED: 4,
    Provenance.OBSERVED: 3,
    Provenance.EXTRACTED: 2,
    Provenance.INFERRED: 1,
}
# How the assistant is told about a memory's origin.
PROVENANCE_LABELS = {
    Provenance.CONFIRMED: "confirmed",
    Provenance.OBSERVED: "observed",
    Provenance.EXTRACTED: "from conversation",
    Provenance.INFERRED: "GUESS",
}


class Source(models.TextChoices):
    SESSION = "session", _("Session")
    TOOL = "tool", _("Tool")
    EVENT = "event", _("Event")
    ADMIN = "admin", _("Admin")


class Scope(models.TextChoices):
    PRIVATE = "private", _("Private")
    ROOM = "room", _("Room")
    SHARED = "shared", _("Shared")
    SYSTEM = "system", _("System")


class Status(models.TextChoices):
    ACTIVE = "active", _("Active")
    SUPERSEDED = "superseded", _("Superseded")


def choices_constraint(field: str, choices: type[models.TextChoices], name: str) -> models.CheckConstraint:
    return models.CheckConstraint(condition=Q(**{f"{field}__in": choices.values}), name=name)


# The holder rule, in one place: a private memory (or forget block) is held by its owner, a room one
# by its room, shared and system ones by neither. The table's constraint below, the write paths'
# check and what a memory of a scope keeps (memories.scopes) all read it.
SCOPE_HOLDER = {Scope.PRIVATE: "owner", Scope.ROOM: "room", Scope.SHARED: None, Scope.SYSTEM: None}


def _scope_holder_q() -> Q:
    """``SCOPE_HOLDER`` as a condition: per holder, its scopes with that column set and the other empty."""
    holders = {
        holder: [scope for scope, held in SCOPE_HOLDER.items() if held == holder] for holder in SCOPE_HOLDER.values()
    }
    condition = Q()
    for holder, scopes in holders.items():
        scope_q = {"scope": scopes[0]} if len(scopes) == 1 else {"scope__in": scopes}
        condition |= Q(**scope_q, owner__isnull=holder != "owner", room__isnull=holder != "room")
    return condition


def scope_constraints(prefix: str) -> list[models.CheckConstraint]:
    """Private needs an owner and no room; room needs a room and no owner; shared/system have neither."""
    return [
        choices_constraint("scope", Scope, f"{prefix}_scope_valid"),
        models.CheckConstraint(
            condition=_scope_holder_q(),
            name=f"{prefix}_scope_owner_room",
            violation_error_message="Private needs an owner (and no room), room needs a room (and no owner), "
            "shared and system have neither.",
        ),
    ]


def visible_scopes(*, speaker, room) -> list[tuple[str, int | None, int | None]]:
    """The one visibility rule, as ``(scope, owner_id, room_id)``: shared + system + room(R) + private(owner = known speaker)."""
    scopes = [(Scope.SHARED, None, None), (Scope.SYSTEM, None, None)]
    if room is not None:
        scopes.append((Scope.ROOM, None, getattr(room, "pk", room)))  # a Room or its id
    if speaker is not None:
        scopes.append((Scope.PRIVATE, getattr(speaker, "pk", speaker), None))  # a Person or its id
    return scopes


def visibility_q(*, speaker, room) -> Q:
    """``visible_scopes`` as a filter."""
    scopes = visible_scopes(speaker=speaker, room=room)
    q = Q(scope__in=[scope for scope, owner_id, room_id in scopes if owner_id is None and room_id is None])
    for scope, owner_id, room_id in scopes:
        if room_id is not None:
            q |= Q(scope=scope, room_id=room_id)
        if owner_id is not None:
            q |= Q(scope=scope, owner_id=owner_id)
    return q


class MemoryQuerySet(models.QuerySet):
    def active(self):
        return self.filter(status=Status.ACTIVE)

    def visible_to(self, *, speaker, room):
        """What a speaker (a Person, or None when unknown) in a room may see."""
        return self.filter(visibility_q(speaker=speaker, room=room))


class LanguageSearchVector(Func):
    """to_tsvector in the memory's language plus 'simple' (so names and numbers match as typed).

    Each configuration is a constant (``'german'::regconfig``), which keeps the expression
    immutable as a generated column requires.
    """

    output_field = SearchVectorField()

    def as_sql(self, compiler, connection, **extra_context):
        language_sql, language_params = compiler.compile(self.source_expressions[0])
        text_sql, text_params = compiler.compile(self.source_expressions[1])
        whens = " ".join(f"WHEN '{code}' THEN '{config}'::regconfig" for code, config in TEXT_SEARCH_CONFIGS.items())
        sql = (
            f"(to_tsvector(CASE {language_sql} {whens} ELSE 'simple'::regconfig END, {text_sql})"
            f" || to_tsvector('simple'::regconfig, {text_sql}))"
        )
        return sql, (*language_params, *text_params, *text_params)


unit_interval = [MinValueValidator(0.0), MaxValueValidator(1.0)]


class Memory(models.Model):
    """One thing the household's assistant knows, in the language it was learned in."""

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FACT, verbose_name=_("kind"))
    content = models.TextField(verbose_name=_("content"))
    language = models.CharField(
        max_length=8, default="en", help_text=_("ISO 639-1 code of the content."), verbose_name=_("language")
    )
    embedding = VectorField(dimensions=configured_dim())
    provenance = models.CharField(max_length=16, choices=Provenance.choices, verbose_name=_("provenance"))
    confidence = models.FloatField(default=1.0, validators=unit_interval, verbose_name=_("confidence"))
    importance = models.FloatField(default=0.5, validators=unit_interval, verbose_name=_("importance"))
    occurrences = models.PositiveIntegerField(
        default=1, help_text=_("How often this was stored (merges add up)."), verbose_name=_("times stored")
    )
    source = models.CharField(max_length=16, choices=Source.choices, verbose_name=_("source"))
    source_ref = models.CharField(
        max_length=100, blank=True, help_text=_("Id of the source, e.g. conversation:12."), verbose_name=_("source id")
    )
    scope = models.CharField(max_length=16, choices=Scope.choices, default=Scope.SHARED, verbose_name=_("scope"))
    owner = models.ForeignKey(
        "people.Person",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="private_memories",
        verbose_name=_("owner"),
    )
    room = models.ForeignKey(
        "people.Room", null=True, blank=True, on_delete=models.PROTECT, related_name="memories", verbose_name=_("room")
    )
    about = models.ForeignKey(
        "people.Person",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="memories_about",
        db_index=False,  # memory_about_idx leads with it, verbose_name=_("about")
    )
    subject = models.CharField(
        max_length=200, blank=True, help_text=_("Normalised subject, for contradictions."), verbose_name=_("subject")
    )
    predicate = models.CharField(
        max_length=200,
        blank=True,
        help_text=_("Normalised predicate, for contradictions."),
        verbose_name=_("predicate"),
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE, verbose_name=_("status"))
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="supersedes",
        verbose_name=_("superseded by"),
    )
    valid_at = models.DateTimeField(
        default=timezone.now, help_text=_("When it became true."), verbose_name=_("valid at")
    )
    created_at = models.DateTimeField(
        default=timezone.now, help_text=_("When it was learned."), verbose_name=_("learned at")
    )
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("changed at"))
    search_vector = models.GeneratedField(
        expression=LanguageSearchVector(F("language"), F("content")),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("memory")
        verbose_name_plural = _("memories")
        indexes = [
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            # No pending list (migration 0007): every keyword search would scan it whole, up to 4 MB.
            GinIndex(fields=["search_vector"], name="memory_search_vector_gin", fastupdate=False),
            models.Index(fields=["scope", "owner", "room"], name="memory_visibility_idx"),
            # Recall's memories about the speaker, newest first in index order. Only columns that never
            # change once set: an index on importance or dates would make their updates non-HOT.
            models.Index(fields=["about", "id"], name="memory_about_idx"),
            models.Index(fields=["subject", "predicate"], name="memory_contradiction_idx"),
            # Also recall's context neighbours: a source's memories in the order they were stored.
            models.Index(fields=["source_ref", "id"], name="memory_source_ref_id_idx"),
        ]
        constraints = [
            choices_constraint("kind", Kind, "memory_kind_valid"),
            choices_constraint("provenance", Provenance, "memory_provenance_valid"),
            choices_constraint("source", Source, "memory_source_valid"),
            choices_constraint("status", Status, "memory_status_valid"),
            *scope_constraints("memory"),
            models.CheckConstraint(condition=~Q(content=""), name="memory_content_not_empty"),
            models.CheckConstraint(condition=Q(language__regex=LANGUAGE_CODE_REGEX), name="memory_language_iso_code"),
            models.CheckConstraint(condition=Q(confidence__gte=0, confidence__lte=1), name="memory_confidence_0_1"),
            models.CheckConstraint(condition=Q(importance__gte=0, importance__lte=1), name="memory_importance_0_1"),
            models.CheckConstraint(
                condition=Q(status=Status.SUPERSEDED) | Q(superseded_by__isnull=True),
                name="memory_only_superseded_has_successor",
            ),
            models.CheckConstraint(condition=~Q(superseded_by=F("pk")), name="memory_not_superseded_by_itself"),
        ]

    def __str__(self):
        # Never the content: this string lands in Django's admin log, which must stay text-free.
        return f"Memory #{self.pk}"

    @property
    def label(self) -> str:
        return PROVENANCE_LABELS[self.provenance]

    @property
    def access_count(self) -> int:
        """How often recall returned this memory (its MemoryAccess row; 0 without one)."""
        access = getattr(self, "access", None)
        return access.count if access is not None else 0

    @property
    def last_accessed_at(self):
        access = getattr(self, "access", None)
        return access.last_accessed_at if access is not None else None


class MemoryAccess(models.Model):
    """How often recall returned a memory, and when last: one narrow row per memory recalled at least once.

    Recall bumps these before every answer. Kept in the memory's own wide row, every bump rewrote
    that row: a full-page image in the WAL for each page first written since the last checkpoint
    (~100 kB per recall), and whenever the page had no room left, a new row version inserted into
    every index of memories, the HNSW graphs included (bench/recall.py: p95 10-12 ms for the bump
    against 1.5 ms here). No database foreign key: its check would lock the memory's row, which
    writes to that page again. Deleting a memory through the ORM deletes its row here; a bump racing
    with a forget can leave a row without its memory, which consolidation removes (ids only, no text).
    """

    memory = models.OneToOneField(
        Memory,
        primary_key=True,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="access",
        verbose_name=_("memory"),
    )
    count = models.PositiveIntegerField(default=0, verbose_name=_("recalls"))
    last_accessed_at = models.DateTimeField(verbose_name=_("last recalled"))

    class Meta:
        verbose_name = _("memory access")
        verbose_name_plural = _("memory accesses")

    def __str__(self):
        return f"Access of memory #{self.memory_id}"


class RecallDay(models.Model):
    """How many recalls ran on a day (the household's TIME_ZONE): a date and a count, no text, no speaker.

    Recall adds one in the statement that loads what it returns (memories.services.access.recall_record);
    the status page draws the last 30 days. Rows older than RECALL_DAYS_KEPT are deleted by
    consolidation's prune step.
    """

    day = models.DateField(primary_key=True, verbose_name=_("day"))
    count = models.PositiveIntegerField(default=0, verbose_name=_("recalls"))

    class Meta:
        verbose_name = _("recalls of a day")
        verbose_name_plural = _("recalls per day")

    def __str__(self):
        return f"{self.day}: {self.count} recalls"


RECALL_DAYS_KEPT = 400  # days of RecallDay rows kept: more than a year, to compare with the year before


class TombstoneQuerySet(models.QuerySet):
    def visible_to(self, *, speaker, room):
        """The blocks a speaker could have made: tombstones of the scopes visible to them."""
        return self.filter(visibility_q(speaker=speaker, room=room))


class Tombstone(models.Model):
    """What is left of a forgotten memory: its embedding and scope, never any text.

    The vector column has no fixed dimension, so blocks made under one embedder survive a
    switch to another (``embedder`` says which one made the vector; see reembed_memories).
    """

    embedding = VectorField()
    embedder = models.CharField(max_length=32, verbose_name=_("embedder"))
    scope = models.CharField(max_length=16, choices=Scope.choices, verbose_name=_("scope"))
    owner = models.ForeignKey(
        "people.Person", null=True, blank=True, on_delete=models.CASCADE, related_name="+", verbose_name=_("owner")
    )
    # PROTECT: a block deleted with its room could let the forgotten content come back.
    room = models.ForeignKey(
        "people.Room",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="forget_blocks",
        verbose_name=_("room"),
    )
    forgotten_at = models.DateTimeField(default=timezone.now, verbose_name=_("forgotten at"))
    forgotten_by_person = models.ForeignKey(
        "people.Person",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("forgotten by (person)"),
    )
    forgotten_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("forgotten by (admin user)"),
    )
    memory_id = models.BigIntegerField(
        null=True, blank=True, help_text=_("Id the forgotten memory had."), verbose_name=_("id of the forgotten memory")
    )
    digests = ArrayField(
        models.CharField(max_length=64),
        default=list,
        blank=True,
        help_text=_("HMAC-SHA256 of the forgotten memory's distinctive tokens (memories/digests.py); no text."),
        verbose_name=_("digests"),
    )
    word_marks = ArrayField(
        models.SmallIntegerField(),
        default=list,
        blank=True,
        help_text=_(
            "12 bits of the HMAC of each of the forgotten memory's content words (memories/digests.py); no text."
        ),
        verbose_name=_("word marks"),
    )
    key_marks = ArrayField(
        models.SmallIntegerField(),
        default=list,
        blank=True,
        help_text=_(
            "12 bits of the HMAC of each of the forgotten memory's key words, names left out (memories/digests.py); "
            "no text."
        ),
        verbose_name=_("key marks"),
    )
    blocked_count = models.PositiveIntegerField(
        default=0, help_text=_("New items this block dropped."), verbose_name=_("times it blocked")
    )
    last_blocked_at = models.DateTimeField(null=True, blank=True, verbose_name=_("last blocked"))

    objects = TombstoneQuerySet.as_manager()

    class Meta:
        ordering = ["-forgotten_at"]
        verbose_name = _("forget block")
        verbose_name_plural = _("forget blocks")
        constraints = [*scope_constraints("tombstone")]

    def __str__(self):
        return _("forget block #%(id)s") % {"id": self.pk}


class AuditAction(models.TextChoices):
    CREATED = "created", _("Created")
    MERGED = "merged", _("Merged")
    SUPERSEDED = "superseded", _("Superseded")
    EDITED = "edited", _("Edited")
    FORGOTTEN = "forgotten", _("Forgotten")
    RECALLED = "recalled", _("Recalled")
    DELETED = "deleted", _("Deleted")
    BLOCKED = "blocked", _("Blocked")
    BLOCK_LIFTED = "block_lifted", _("Block lifted")


class AuditEvent(models.Model):
    """A text-free trail: what happened to memory N, never what it said."""

    memory_id = models.BigIntegerField(db_index=True, verbose_name=_("memory"))
    action = models.CharField(max_length=16, choices=AuditAction.choices, verbose_name=_("what happened"))
    related_memory_id = models.BigIntegerField(
        null=True, blank=True, help_text=_("The other memory of a merge."), verbose_name=_("other memory")
    )
    count = models.PositiveIntegerField(default=1, verbose_name=_("count"))
    actor = models.CharField(
        max_length=64, help_text=_("tool, admin:<user id>, job:<name>, person:<id>."), verbose_name=_("by")
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True, verbose_name=_("when"))

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")
        constraints = [choices_constraint("action", AuditAction, "audit_action_valid")]

    def __str__(self):
        return f"{self.action} memory #{self.memory_id}"


class ForgetRequest(models.Model):
    """A pending forget: a hashed single-use token bound to a speaker and candidate ids. No text."""

    token_hash = models.CharField(max_length=64, unique=True)
    speaker = models.ForeignKey("people.Person", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    room = models.ForeignKey("people.Room", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    candidate_ids = ArrayField(models.BigIntegerField())
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(expires_at__gt=F("created_at")), name="forget_request_expires_later")
        ]

    def __str__(self):
        return f"Forget request #{self.pk}"


class RunStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    DONE = "done", _("Done")
    FAILED = "failed", _("Failed")


class ConsolidationRun(models.Model):
    """One consolidation run and its text-free stats."""

    started_by = models.CharField(
        max_length=64, help_text=_("schedule, command, admin:<user id>."), verbose_name=_("started by")
    )
    dry_run = models.BooleanField(default=False, verbose_name=_("dry run"))
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING, verbose_name=_("status")
    )
    started_at = models.DateTimeField(default=timezone.now, verbose_name=_("started"))
    finished_at = models.DateTimeField(null=True, blank=True, verbose_name=_("finished"))
    merged = models.PositiveIntegerField(default=0, verbose_name=_("merged"))
    superseded = models.PositiveIntegerField(default=0, verbose_name=_("superseded"))
    deleted = models.PositiveIntegerField(default=0, verbose_name=_("deleted"))
    duration_ms = models.PositiveIntegerField(null=True, blank=True, verbose_name=_("duration (ms)"))
    error = models.CharField(
        max_length=200, blank=True, help_text=_("Exception class only; never memory text."), verbose_name=_("error")
    )

    class Meta:
        ordering = ["-started_at"]
        verbose_name = _("consolidation run")
        verbose_name_plural = _("consolidation runs")
        constraints = [choices_constraint("status", RunStatus, "consolidation_status_valid")]

    def __str__(self):
        return _("Consolidation run #%(id)s") % {"id": self.pk}


class EmbeddingSpace(models.Model):
    """The one row that says which embedder the stored vectors belong to."""

    embedder = models.CharField(max_length=32, verbose_name=_("embedder"))
    dim = models.PositiveIntegerField(verbose_name=_("dimensions"))
    updated_at = models.DateTimeField(auto_now=True, verbose_name=_("changed at"))

    class Meta:
        verbose_name = _("embedding space")
        verbose_name_plural = _("embedding spaces")
        constraints = [models.CheckConstraint(condition=Q(pk=1), name="embedding_space_singleton")]

    def __str__(self):
        return f"{self.embedder} ({self.dim}-d)"
