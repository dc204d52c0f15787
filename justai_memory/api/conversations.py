"""Conversations: start, append turns, end, working memory."""

from typing import Literal

from ninja import Router, Schema, Status
from pydantic import Field

from justai_memory.api.caller import LocationSaid, RoomId, SpeakerId, caller_of
from justai_memory.api.common import ERRORS, Id, Input, LanguageCode, Text, lookup
from justai_memory.api.memories import TurnOut
from memories.limits import MAX_TURNS_PER_CALL
from people.models import Person
from transcripts.models import Conversation, Role
from transcripts.selectors import working_memory
from transcripts.services.conversations import TurnDraft, conversation_end, conversation_start, turns_append

router = Router(tags=["conversations"])


def _conversation(conversation_id: int) -> Conversation:
    conversation = lookup(
        Conversation, conversation_id, field="conversation_id", queryset=Conversation.objects.select_related("speaker")
    )
    assert conversation is not None
    return conversation


class ConversationIn(Input):
    room_id: RoomId
    speaker_id: SpeakerId = None
    language: LanguageCode = Field(description="ISO 639-1 code of the conversation, e.g. de.")
    model_location: LocationSaid  # required, no default: every recall with the conversation reads it


class IdOut(Schema):
    id: int


@router.post("/conversations", response={201: IdOut, **ERRORS}, url_name="internal-conversations")
def conversations_create(request, payload: ConversationIn):
    """Start a conversation."""
    caller = caller_of(payload)  # where its model runs, by the one rule: said, never a default
    conversation = conversation_start(caller=caller, language=payload.language)
    return Status(201, {"id": conversation.pk})


class TurnIn(Input):
    role: Literal[tuple(Role.values)]
    text: Text
    speaker_id: Id | None = Field(None, description="Default for a user turn: the conversation's speaker.")


class TurnsIn(Input):
    turns: list[TurnIn] = Field(min_length=1, max_length=MAX_TURNS_PER_CALL)


class AddedOut(Schema):
    added: int


@router.post(
    "/conversations/{int:conversation_id}/turns", response={201: AddedOut, **ERRORS}, url_name="internal-turns"
)
def conversation_turns(request, conversation_id: Id, payload: TurnsIn):
    """Append turns (all or none); a user turn without a speaker is the conversation's speaker's."""
    conversation = _conversation(conversation_id)
    drafts = []
    for i, turn in enumerate(payload.turns):
        speaker = lookup(Person, turn.speaker_id, field=f"turns[{i}].speaker_id")
        drafts.append(TurnDraft(role=turn.role, text=turn.text, speaker=speaker))
    added = turns_append(conversation=conversation, turns=drafts)
    return Status(201, {"added": len(added)})


class EndOut(Schema):
    id: int
    extraction_status: str


@router.post(
    "/conversations/{int:conversation_id}/end", response={200: EndOut, **ERRORS}, url_name="internal-conversation-end"
)
def conversation_end_view(request, conversation_id: Id):
    """End a conversation and queue its extraction (after commit); ending twice changes nothing."""
    conversation = conversation_end(conversation=_conversation(conversation_id))
    return {"id": conversation.pk, "extraction_status": conversation.extraction_status}


class WorkingMemoryOut(Schema):
    turns: list[TurnOut]


@router.get(
    "/conversations/{int:conversation_id}/working_memory",
    response={200: WorkingMemoryOut, **ERRORS},
    url_name="internal-working-memory",
)
def conversation_working_memory(request, conversation_id: Id):
    """The last 30 turns, oldest first."""
    return {"turns": working_memory(conversation=_conversation(conversation_id))}
