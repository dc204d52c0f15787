"""What the house observes: sightings, events, and observed memories (provenance observed, source event)."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.limits import MAX_EVENT_KIND_CHARS, TIMESTAMP_OUT_OF_RANGE, timestamp_in_range
from memories.models import Kind, Provenance, Scope, Source
from memories.services.store import MemoryDraft, StoreResult, memory_store
from transcripts.models import Event, Sighting

EVENT_KIND_INVALID = f"'kind' must be a non-empty string of at most {MAX_EVENT_KIND_CHARS} characters."
PAYLOAD_INVALID = "'payload' must be a JSON object."


def _check_time(value: datetime | None, *, field: str) -> None:
    if value is not None and not timestamp_in_range(value):
        raise ApplicationError(TIMESTAMP_OUT_OF_RANGE.format(field=field), field=field)


def sighting_record(*, person, room, seen_at: datetime | None = None) -> Sighting:
    """Record that ``person`` was seen in ``room`` (now, unless ``seen_at`` says when: 1970 to a day ahead)."""
    _check_time(seen_at, field="seen_at")
    return Sighting.objects.create(person=person, room=room, seen_at=seen_at or timezone.now())


def event_record(
    *, kind: str, payload: dict | None = None, room=None, person=None, occurred_at: datetime | None = None
) -> Event:
    """Record a household event (from a sensor or an automation) with its JSON payload; ``occurred_at`` 1970 to a day ahead."""
    _check_time(occurred_at, field="occurred_at")
    if not isinstance(kind, str) or not kind.strip() or len(kind.strip()) > MAX_EVENT_KIND_CHARS:
        raise ApplicationError(EVENT_KIND_INVALID, field="kind")
    if payload is not None and not isinstance(payload, dict):
        raise ApplicationError(PAYLOAD_INVALID, field="payload")
    return Event.objects.create(
        kind=kind.strip(), payload=payload or {}, room=room, person=person, occurred_at=occurred_at or timezone.now()
    )


@transaction.atomic
def memory_observe(
    *,
    content: str,
    language: str | None = None,
    event: Event | None = None,
    kind: str = Kind.FACT,
    scope: str = Scope.SHARED,
    owner=None,
    room=None,
    about=None,
    confidence: float = 1.0,
    importance: float = 0.5,
) -> StoreResult:
    """Store what sensors observed (provenance observed, source event ``event:<id>``); forget blocks apply, duplicates merge.

    Without a ``language`` the content's is detected (too short to tell: the owner's, then the language
    of the person it is about, then the default).
    """
    draft = MemoryDraft.build(
        content=content,
        provenance=Provenance.OBSERVED,
        source=Source.EVENT,
        language=language,
        person=owner or about or (event.person if event is not None else None),
        kind=kind,
        scope=scope,
        owner=owner,
        room=room if room is not None else (event.room if event else None),
        about=about,
        source_ref=f"event:{event.pk}" if event else "",
        confidence=confidence,
        importance=importance,
        valid_at=event.occurred_at if event else None,
    )
    return memory_store(draft=draft, actor=Actor.event(event.pk if event else None))
