"""People and rooms: the household's ids for every other call; what is stored about a person, their export, erasure."""

from datetime import datetime
from typing import Annotated, Any

from ninja import Router, Schema, Status
from ninja.pagination import paginate
from pydantic import Field

from justai_memory.api.caller import LocationSaidOrNone
from justai_memory.api.common import ERRORS, Id, Input, IsoDateTime, LanguageCode, Page, lookup, text
from justai_memory.household import person_delete_confirm, person_delete_request, person_export
from memories.actors import Actor
from memories.limits import MAX_TOKEN_CHARS
from memories.selectors.person import person_memories
from memories.selectors.privacy import memories_allowed_or_refuse, model_location_of
from memories.services.forget import forget_everything_request_create
from people.models import Person, Room
from people.services import (
    MAX_ALIASES,
    MAX_NAME_CHARS,
    person_create,
    person_update,
    room_create,
    room_delete,
    room_update,
)

router = Router(tags=["household"])

Name = text(MAX_NAME_CHARS)
Aliases = Annotated[list[Name], Field(max_length=MAX_ALIASES)]


def _person(person_id: int) -> Person:
    return lookup(Person, person_id, field="person_id")


def _room(room_id: int) -> Room:
    return lookup(Room, room_id, field="room_id")


# --- people -------------------------------------------------------------------------------------


class PersonIn(Input):
    name: Name = Field(description="Unique in the household, regardless of case.")
    aliases: Aliases = Field(default_factory=list, description="Other names they go by.")
    preferred_language: LanguageCode = Field("en", description="ISO 639-1 code, e.g. de, it, en.")


class PersonPatch(Input):
    name: Name | None = None
    aliases: Aliases | None = None
    preferred_language: LanguageCode | None = None


class PersonOut(Schema):
    id: int
    name: str
    aliases: list[str]
    preferred_language: str
    created_at: IsoDateTime


@router.get("/people", response={200: list[PersonOut], **ERRORS}, url_name="internal-people")
def people_list(request):
    """Every household member with the id that speaker_id (and MCP's X-Speaker-Id) takes."""
    return Person.objects.order_by("pk")


@router.post("/people", response={201: PersonOut, **ERRORS})
def people_create(request, payload: PersonIn):
    """Add a household member."""
    return Status(201, person_create(**payload.model_dump()))


@router.get("/people/{int:person_id}", response={200: PersonOut, **ERRORS}, url_name="internal-person")
def person_get(request, person_id: Id):
    return _person(person_id)


@router.patch("/people/{int:person_id}", response={200: PersonOut, **ERRORS})
def person_patch(request, person_id: Id, payload: PersonPatch):
    """Change the fields given (null leaves a field as it is)."""
    changes = {k: v for k, v in payload.model_dump(exclude_unset=True).items() if v is not None}
    return person_update(person=_person(person_id), changes=changes)


class DeletionPreviewOut(Schema):
    private_memories: int
    forget_blocks: int
    sightings: int
    conversations_to_block: int


class DeletionRequestOut(Schema):
    token: str = Field(description="Send it with DELETE people/{id} and confirm: true (10 minutes).")
    expires_at: IsoDateTime
    would_remove: DeletionPreviewOut


@router.post(
    "/people/{int:person_id}/deletion",
    response={200: DeletionRequestOut, **ERRORS},
    url_name="internal-person-deletion",
)
def person_deletion_request(request, person_id: Id):
    """Step one of deleting a person: what it would remove, and a confirmation token. Nothing is removed."""
    token, expires_at, preview = person_delete_request(person=_person(person_id))
    return {"token": token, "expires_at": expires_at, "would_remove": preview}


class ConfirmIn(Input):
    token: text(MAX_TOKEN_CHARS) = Field(description="The token of the request step.")
    confirm: bool = Field(False, description="true only once the deletion was confirmed.")


class DeletionOut(Schema):
    person_id: int
    private_memories_deleted: int
    forget_blocks_deleted: int
    sightings_deleted: int
    conversations_blocked: int


@router.delete("/people/{int:person_id}", response={200: DeletionOut, **ERRORS})
def person_delete_view(request, person_id: Id, payload: ConfirmIn):
    """Delete a person with the token of POST people/{id}/deletion: their private memories, forget blocks and
    sightings go; their conversations are kept but never extracted. Nothing is removed without a valid token."""
    deletion = person_delete_confirm(
        person=_person(person_id), token=payload.token, confirm=payload.confirm, actor=Actor.API
    )
    return deletion.as_dict()


class PersonMemoryOut(Schema):
    id: int
    relation: str = Field(description="owner (their own private memory) or about (a memory about them).")
    content: str
    language: str
    kind: str
    label: str
    scope: str
    room_id: int | None
    date: IsoDateTime

    @staticmethod
    def resolve_date(memory) -> datetime:
        return memory.valid_at


@router.get(
    "/people/{int:person_id}/memories",
    response={200: list[PersonMemoryOut], **ERRORS},
    url_name="internal-person-memories",
)
@paginate(Page)
def person_memories_list(request, person_id: Id, model_location: LocationSaidOrNone = None):
    """What the assistant would use about this person: active memories they own or that are about them,
    only those they may see as the speaker, newest first. ``model_location`` (local or cloud, required):
    where the model that reads them runs; a cloud model gets 403 with the reason unless the household allows it."""
    person = _person(person_id)
    memories_allowed_or_refuse(model_location=model_location_of(model_location=model_location))
    return person_memories(person=person).active().defer("embedding")


@router.get("/people/{int:person_id}/export", response={200: dict[str, Any], **ERRORS})
def person_export_view(request, person_id: Id):
    """Everything stored about and by this person as one JSON document (format justai-memory/person-export/1)."""
    return person_export(person=_person(person_id))


class EraseRequestOut(Schema):
    token: str | None = Field(
        description="Confirm with POST memories/forget {token, speaker_id: this person, confirm: true}; "
        "null when nothing is stored about them."
    )
    expires_at: IsoDateTime | None
    memory_ids: list[int]


@router.post("/people/{int:person_id}/forget_everything", response={200: EraseRequestOut, **ERRORS})
def person_forget_everything(request, person_id: Id):
    """ "Forget everything about me", step one: one forget token for every memory they own or that is about them."""
    token, expires_at, ids = forget_everything_request_create(person=_person(person_id))
    return {"token": token, "expires_at": expires_at, "memory_ids": ids}


# --- rooms --------------------------------------------------------------------------------------


class RoomIn(Input):
    name: Name = Field(description="Unique in the household, regardless of case.")


class RoomOut(Schema):
    id: int
    name: str
    created_at: IsoDateTime


@router.get("/rooms", response={200: list[RoomOut], **ERRORS}, url_name="internal-rooms")
def rooms_list(request):
    """Every room with the id that room_id (and MCP's X-Room-Id) takes."""
    return Room.objects.order_by("pk")


@router.post("/rooms", response={201: RoomOut, **ERRORS})
def rooms_create(request, payload: RoomIn):
    return Status(201, room_create(name=payload.name))


@router.get("/rooms/{int:room_id}", response={200: RoomOut, **ERRORS}, url_name="internal-room")
def room_get(request, room_id: Id):
    return _room(room_id)


@router.patch("/rooms/{int:room_id}", response={200: RoomOut, **ERRORS})
def room_patch(request, room_id: Id, payload: RoomIn):
    return room_update(room=_room(room_id), name=payload.name)


class RoomDeletedOut(Schema):
    room_id: int


@router.delete("/rooms/{int:room_id}", response={200: RoomDeletedOut, **ERRORS})
def room_delete_view(request, room_id: Id):
    """Delete a room that no memory, conversation or forget block refers to (409 otherwise); its sightings go."""
    return {"room_id": room_delete(room=_room(room_id))}
