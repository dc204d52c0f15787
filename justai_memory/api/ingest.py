"""What the house observes: sightings, events and observed memories."""

from typing import Annotated, Any, Literal

from ninja import Router, Schema, Status
from pydantic import AfterValidator, Field

from justai_memory.api.common import ERRORS, Id, Input, LanguageCode, Text, Timestamp, lookup, plain_json, text
from justai_memory.api.conversations import IdOut
from memories.limits import MAX_EVENT_KIND_CHARS
from memories.models import Kind, Scope
from memories.services.store import StoreOutcome
from people.models import Person, Room
from transcripts.models import Event
from transcripts.services.ingest import event_record, memory_observe, sighting_record

router = Router(tags=["house"])


class SightingIn(Input):
    person_id: Id
    room_id: Id
    seen_at: Timestamp | None = Field(None, description="ISO 8601; without zone: TIME_ZONE; default: now.")


@router.post("/sightings", response={201: IdOut, **ERRORS}, url_name="internal-sightings")
def sightings_create(request, payload: SightingIn):
    """A person seen in a room."""
    sighting = sighting_record(
        person=lookup(Person, payload.person_id, field="person_id"),
        room=lookup(Room, payload.room_id, field="room_id"),
        seen_at=payload.seen_at,
    )
    return Status(201, {"id": sighting.pk})


class EventIn(Input):
    kind: text(MAX_EVENT_KIND_CHARS) = Field(description="What happened, e.g. door.opened.")
    payload: Annotated[dict[str, Any], AfterValidator(plain_json)] | None = None
    room_id: Id | None = None
    person_id: Id | None = None
    occurred_at: Timestamp | None = Field(None, description="ISO 8601; without zone: TIME_ZONE; default: now.")


@router.post("/events", response={201: IdOut, **ERRORS}, url_name="internal-events")
def events_create(request, payload: EventIn):
    """A household event from a sensor or an automation, with its JSON payload."""
    event = event_record(
        kind=payload.kind,
        payload=payload.payload,
        room=lookup(Room, payload.room_id, field="room_id"),
        person=lookup(Person, payload.person_id, field="person_id"),
        occurred_at=payload.occurred_at,
    )
    return Status(201, {"id": event.pk})


class ObserveIn(Input):
    content: Text
    language: LanguageCode | None = Field(
        None,
        description="ISO 639-1 code of the content (default: detected from the content; too short to tell: the "
        "language of the owner or of the person it is about).",
    )
    event_id: Id | None = None
    kind: Literal[tuple(Kind.values)] = Kind.FACT.value
    scope: Literal[tuple(Scope.values)] = Scope.SHARED.value
    room_id: Id | None = None
    owner_id: Id | None = None
    about_id: Id | None = None
    confidence: float = Field(1.0, ge=0, le=1)
    importance: float = Field(0.5, ge=0, le=1)


class ObserveOut(Schema):
    id: int | None
    outcome: str


@router.post("/memories/observe", response={(200, 201): ObserveOut, **ERRORS}, url_name="internal-memories-observe")
def memories_observe(request, payload: ObserveIn):
    """An observed memory: 201 when created or merged; 200 with id null when it was forgotten before."""
    result = memory_observe(
        content=payload.content,
        language=payload.language,
        event=lookup(Event, payload.event_id, field="event_id"),
        kind=payload.kind,
        scope=payload.scope,
        room=lookup(Room, payload.room_id, field="room_id"),
        owner=lookup(Person, payload.owner_id, field="owner_id"),
        about=lookup(Person, payload.about_id, field="about_id"),
        confidence=payload.confidence,
        importance=payload.importance,
    )
    if result.outcome == StoreOutcome.BLOCKED:
        return Status(200, {"id": None, "outcome": result.outcome})
    return Status(201, {"id": result.memory.pk, "outcome": result.outcome})
