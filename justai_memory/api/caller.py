"""Who asks: the one resolver of the caller, for the JSON API, the MCP server and the admin's recall preview.

A caller is a room, a speaker (None: unknown), where the model that reads the answer runs and the
conversation's language (``memories.caller.Caller``, the value every service takes whole); a request
also names the conversation it belongs to and, through MCP, the OAuth connection it came through
(``RequestCaller``). One resolver takes loaded objects (``caller_resolve``: the admin's form, an OAuth
connection); the ids a request sends are looked up and handed to it (``caller_of_ids``, ``caller_of``
for a request body). It checks that the conversation is the room's and resolves the model location by
the one location rule (``memories.selectors.privacy.model_location_of``); no service resolves them again.
Each caller field has one description, here, for every schema that takes it.

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
from typing import Annotated, Literal

from pydantic import Field

from connections.models import Connection
from justai_core.errors import ApplicationError
from justai_core.locations import CLOUD, MODEL_LOCATIONS
from justai_memory.api.common import Id, Input, lookup
from memories.caller import Caller
from memories.selectors.privacy import model_location_of
from memories.selectors.recall import CONVERSATION_OTHER_ROOM
from people.models import Person, Room
from transcripts.models import Conversation

# The caller fields, each with its one description, as every request schema takes them.
RoomId = Annotated[Id, Field(description="The room the request is made in.")]
SpeakerId = Annotated[Id | None, Field(description="The recognised speaker; absent for an unknown speaker.")]
ConversationId = Annotated[Id | None, Field(description="The conversation (of this room) the request belongs to.")]
MODEL_LOCATION_DESCRIPTION = (
    "Where the model that reads the answer runs: local or cloud; memories reach a cloud model only when the "
    "household allows it. Required unless the request names a conversation_id: then the conversation's location "
    "applies too (cloud if either says so)."
)
LocationSaid = Annotated[Literal[MODEL_LOCATIONS], Field(description=MODEL_LOCATION_DESCRIPTION)]
LocationSaidOrNone = Annotated[Literal[MODEL_LOCATIONS] | None, Field(description=MODEL_LOCATION_DESCRIPTION)]


class CallerIn(Input):
    """The fields of a request that say who asks (``caller_of`` resolves them): every request that reads memories."""

    room_id: RoomId
    speaker_id: SpeakerId = None
    conversation_id: ConversationId = None
    model_location: LocationSaidOrNone = None


@dataclass(frozen=True)
class RequestCaller(Caller):
    """A caller as a surface resolved it: also the conversation it named and the OAuth connection it came through."""

    conversation: Conversation | None = None
    connection: Connection | None = None


def caller_resolve(
    *,
    room: Room,
    speaker: Person | None = None,
    conversation: Conversation | None = None,
    connection: Connection | None = None,
    model_location: str | None = None,
    location_required: bool = True,
    reads_memories: bool = True,
) -> RequestCaller:
    """The caller of these loaded objects: a 400 naming ``conversation_id`` for a conversation of another room,
    and the model location by the one rule from what the caller says and what its conversation or connection
    stored (a 400 naming ``model_location`` for a value it refuses, or for none when ``location_required`` and
    nothing stored says one). A request that reads no memory text (``reads_memories=False``: remember) needs no
    location and gets cloud."""
    if conversation is not None and conversation.room_id != room.pk:
        raise ApplicationError(CONVERSATION_OTHER_ROOM, field="conversation_id")
    stored = next((held.model_location for held in (conversation, connection) if held is not None), None)
    location = (
        model_location_of(model_location=model_location, stored_location=stored, required=location_required)
        if reads_memories
        else CLOUD
    )
    return RequestCaller(
        room=room,
        speaker=speaker,
        model_location=location,
        language=conversation.language if conversation is not None else None,
        conversation=conversation,
        connection=connection,
    )


def caller_of_ids(
    *,
    room_id: int,
    speaker_id: int | None = None,
    conversation_id: int | None = None,
    model_location: str | None = None,
    location_required: bool = True,
    reads_memories: bool = True,
) -> RequestCaller:
    """The caller these ids name (``caller_resolve`` on the rows): a 404 naming the unknown id (``room_id``,
    ``speaker_id``, ``conversation_id``), before anything is resolved or written."""
    return caller_resolve(
        room=lookup(Room, room_id, field="room_id"),
        speaker=lookup(Person, speaker_id, field="speaker_id"),
        conversation=lookup(Conversation, conversation_id, field="conversation_id"),
        model_location=model_location,
        location_required=location_required,
        reads_memories=reads_memories,
    )


def caller_of(payload, *, reads_memories: bool = True) -> RequestCaller:
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


def caller_of_connection(connection: Connection) -> RequestCaller:
    """The caller an approved OAuth connection fixes: its room, speaker and model location (a stored location
    other than local is cloud), whatever the client's headers say."""
    return caller_resolve(room=connection.room, speaker=connection.speaker, connection=connection)
