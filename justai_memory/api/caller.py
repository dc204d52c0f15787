"""Who asks: the one caller context of the JSON API and the MCP server, resolved once per request.

A caller is a room, a speaker (None: unknown), a conversation (None: none named) and where the model
that reads the answer runs. The JSON API takes them from the request body (``caller_of``); the MCP
server from an approved OAuth connection (``caller_of_connection``) or from its client's headers
(``caller_of_ids`` after it read them). Every way resolves the ids and the model location here, by
the one location rule (``memories.selectors.privacy.model_location_of``), and hands services the
resolved values: no service resolves them again.

The location fails closed, the same rule on every surface:

- a location that is neither ``local`` nor ``cloud`` is refused (400 naming ``model_location``, the
  one message; MCP adds the header it came from);
- a stored location (the conversation's, the connection's) other than ``local`` is cloud, and the
  answer is local only when every location known says local;
- saying nothing with nothing stored is refused where the caller has a field to say it in (the JSON
  API: recall and find_to_forget without a conversation, ``POST /conversations``, the lists), and is
  cloud where a client configuration may leave the header out (MCP's ``X-Model-Location``). Either
  way no memory text reaches a model whose location nobody said (docs/privacy.md, the cloud rule).
"""

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from connections.models import Connection
from justai_core.errors import ApplicationError
from justai_core.locations import CLOUD, MODEL_LOCATIONS
from justai_memory.api.common import Id, Input, lookup
from memories.selectors.privacy import model_location_of
from memories.selectors.recall import CONVERSATION_OTHER_ROOM
from people.models import Person, Room
from transcripts.models import Conversation

ModelLocationField = Field(
    None,
    description="Where the model that reads the answer runs: local or cloud. Required without a conversation_id "
    "(the cloud rule fails closed); with one, the conversation's location applies (cloud if either says so).",
)


class CallerIn(Input):
    """The fields of a request that say who asks (``caller_of`` resolves them): every request that reads memories."""

    room_id: Id
    speaker_id: Id | None = Field(None, description="The recognised speaker; absent for an unknown speaker.")
    conversation_id: Id | None = Field(None, description="The conversation (of this room) the request belongs to.")
    model_location: Literal[MODEL_LOCATIONS] | None = ModelLocationField


@dataclass(frozen=True)
class Caller:
    """Who asks, in which room and conversation, for a model that runs where; through which OAuth connection."""

    room: Room
    speaker: Person | None
    conversation: Conversation | None
    model_location: str
    connection: Connection | None = None

    @property
    def conversation_language(self) -> str | None:
        return self.conversation.language if self.conversation is not None else None


def caller_of_ids(
    *,
    room_id: int,
    speaker_id: int | None = None,
    conversation_id: int | None = None,
    model_location: str | None = None,
    location_required: bool = True,
    reads_memories: bool = True,
) -> Caller:
    """The caller these ids name: a 404 naming the unknown id (``room_id``, ``speaker_id``,
    ``conversation_id``), a 400 for a conversation of another room, and the model location by the one
    rule (a 400 naming ``model_location`` for a value it refuses, or for none when ``location_required``
    and no conversation says one). A request that reads no memory text (``reads_memories=False``:
    remember) needs no location and gets cloud."""
    room = lookup(Room, room_id, field="room_id")
    speaker = lookup(Person, speaker_id, field="speaker_id")
    conversation = lookup(Conversation, conversation_id, field="conversation_id")
    if conversation is not None and conversation.room_id != room.pk:
        raise ApplicationError(CONVERSATION_OTHER_ROOM, field="conversation_id")
    location = (
        model_location_of(
            model_location=model_location,
            stored_location=conversation.model_location if conversation is not None else None,
            required=location_required,
        )
        if reads_memories
        else CLOUD
    )
    return Caller(room=room, speaker=speaker, conversation=conversation, model_location=location)


def caller_of(payload, *, reads_memories: bool = True) -> Caller:
    """The caller a JSON API request names in its fields ``room_id``, ``speaker_id``, ``conversation_id``
    and ``model_location`` (those it has): the API's caller must say where its model runs unless its
    conversation does."""
    return caller_of_ids(
        room_id=payload.room_id,
        speaker_id=getattr(payload, "speaker_id", None),
        conversation_id=getattr(payload, "conversation_id", None),
        model_location=getattr(payload, "model_location", None),
        reads_memories=reads_memories,
    )


def caller_of_connection(connection: Connection) -> Caller:
    """The caller an approved OAuth connection fixes: its room, speaker and model location (a stored location
    other than local is cloud), whatever the client's headers say."""
    location = model_location_of(model_location=None, stored_location=connection.model_location)
    return Caller(
        room=connection.room,
        speaker=connection.speaker,
        conversation=None,
        model_location=location,
        connection=connection,
    )
