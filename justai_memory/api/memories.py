"""Recall, remember and forget: what the assistant calls before and while it answers."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Router, Schema, Status
from pydantic import BeforeValidator, Field, field_validator
from pydantic_core import PydanticCustomError

from justai_memory.api.caller import CallerIn, ConversationId, RoomId, SpeakerId, caller_of
from justai_memory.api.common import ERRORS, Id, Input, Integer, IsoDateTime, LanguageCode, Text, integral, lookup, text
from memories.limits import MAX_MEMORY_IDS, MAX_TOKEN_CHARS, RECALL_LIMIT_DEFAULT, RECALL_LIMIT_MAX
from memories.models import Kind, Scope, Tombstone
from memories.selectors.recall import (
    ABOUT_SPEAKER_MAX,
    RecalledMemory,
    RecallResult,
)
from memories.services.forget import ForgetFind, forget_request_confirm, forget_request_create
from memories.services.recall import memory_recall
from memories.services.remember import REMEMBER_SCOPES, memory_remember
from memories.services.store import StoreResult
from people.models import Person
from transcripts.selectors import working_memory

router = Router(tags=["memories"])

IDS_NOT_A_LIST = f"must be a list of at most {MAX_MEMORY_IDS} integer ids"


# --- recall -------------------------------------------------------------------------------------


class RecallIn(CallerIn):
    query: Text = Field(description="What the user just said, or what the assistant needs to know.")
    limit: Integer = Field(
        RECALL_LIMIT_DEFAULT,
        ge=1,
        le=RECALL_LIMIT_MAX,
        description=f"How many memories to return at most (1 to {RECALL_LIMIT_MAX}); up to {ABOUT_SPEAKER_MAX} "
        "memories about a recognised speaker may come in addition.",
    )


class TurnOut(Schema):
    role: str
    speaker_id: int | None
    text: str
    at: datetime


class RecallOut(Schema):
    memories: list[RecalledMemory]  # the selector's dataclass: a field it gains is answered and documented
    prompt: str
    withheld: bool
    withheld_reason: str | None
    working_memory: list[TurnOut]


def recalled(result: RecallResult) -> dict:
    """RecallOut's fields from the recall selector's result, all but working_memory."""
    return {
        "memories": result.memories,
        "prompt": result.prompt,
        "withheld": result.withheld,
        "withheld_reason": result.withheld_reason or None,
    }


@router.post("/recall", response={200: RecallOut, **ERRORS}, url_name="internal-recall")
def recall(request, payload: RecallIn):
    """The memories, prompt block and working memory for the assistant's next answer."""
    caller = caller_of(payload)
    result = memory_recall(query=payload.query, caller=caller, limit=payload.limit)
    return {
        **recalled(result),
        # The running conversation's own turns: the model has them already, wherever it runs.
        "working_memory": working_memory(conversation=caller.conversation) if caller.conversation is not None else [],
    }


# --- remember -----------------------------------------------------------------------------------


class RememberIn(Input):
    content: Text = Field(
        description="The fact as one complete sentence, e.g. 'The spare key for the cellar is in the blue tin in the hall.'"
    )
    room_id: RoomId
    speaker_id: SpeakerId = None
    conversation_id: ConversationId = None
    language: LanguageCode | None = Field(
        None,
        description="ISO 639-1 code of the content, e.g. de, en, it (default: detected from the content; "
        "too short to tell: the conversation's, then the speaker's).",
    )
    # The values, not the enum members: a refusal lists "shared, room, private", not "Scope.SHARED, ...".
    scope: Literal[tuple(scope.value for scope in REMEMBER_SCOPES)] = Field(
        Scope.SHARED.value,
        description="shared: for the whole household (default); private: only for the speaker (needs a recognised "
        "speaker); room: only relevant in this room.",
    )
    kind: Literal[tuple(Kind.values)] = Field(
        Kind.FACT.value, description="fact (default), preference, procedure, note or episode."
    )
    about_id: Id | None = Field(None, description="The person the memory is about.")


class RememberOut(Schema):
    id: int
    outcome: str
    lifted_blocks: int


def remembered(result: StoreResult) -> dict:
    """RememberOut from the remember service's result (here and in the MCP tool)."""
    return {"id": result.memory.pk, "outcome": result.outcome, "lifted_blocks": len(result.lifted_tombstones)}


@router.post("/memories/remember", response={201: RememberOut, **ERRORS}, url_name="internal-remember")
def remember(request, payload: RememberIn):
    """Store what the speaker asked to remember (confirmed); lifts their forget blocks on it."""
    caller = caller_of(payload, reads_memories=False)
    about = lookup(Person, payload.about_id, field="about_id")
    result = memory_remember(
        content=payload.content,
        caller=caller,
        language=payload.language,
        scope=payload.scope,
        kind=payload.kind,
        about=about,
        source_ref=f"conversation:{caller.conversation.pk}" if caller.conversation is not None else "",
    )
    return Status(201, remembered(result))


# --- forget -------------------------------------------------------------------------------------


class FindToForgetIn(CallerIn):
    query: Text = Field(description="What to forget, in the user's words.")


class CandidateOut(Schema):
    id: int
    content: str
    label: str
    scope: str


class FindToForgetOut(Schema):
    token: str | None
    expires_at: IsoDateTime | None
    candidates: list[CandidateOut]
    withheld: bool = Field(description="true: the cloud rule kept the candidates from this model (no token).")
    withheld_reason: str | None = Field(description="Why, and what to tell the user: forget with a local model.")


def candidates_out(found: ForgetFind) -> dict:
    """FindToForgetOut from the forget service's candidates (here and in the MCP tool)."""
    return {
        "token": found.token,
        "expires_at": found.expires_at,
        "candidates": found.candidates,
        "withheld": bool(found.withheld_reason),
        "withheld_reason": found.withheld_reason or None,
    }


@router.post("/memories/find_to_forget", response={200: FindToForgetOut, **ERRORS}, url_name="internal-find-to-forget")
def find_to_forget(request, payload: FindToForgetIn):
    """`memory.find_to_forget`: candidates the speaker may see, and a 10-minute single-use token to confirm with.

    Read the candidates to the user and ask which to forget; forget takes the confirmed ones as ``memory_ids``.
    """
    found = forget_request_create(query=payload.query, caller=caller_of(payload))
    return candidates_out(found)


def _id_list(value: Any) -> Any:
    if isinstance(value, list):
        value = [integral(pk) for pk in value]
    if value is not None and (
        not isinstance(value, list)
        or len(value) > MAX_MEMORY_IDS
        or any(isinstance(pk, bool) or not isinstance(pk, int) for pk in value)
    ):
        raise PydanticCustomError("id_list", IDS_NOT_A_LIST)
    return value


class ForgetIn(Input):
    token: text(MAX_TOKEN_CHARS) = Field(description="The token memory_find_to_forget returned.")
    confirm: bool = Field(False, description="true only when the user said yes.")
    speaker_id: SpeakerId = None
    memory_ids: Annotated[list[Id] | None, BeforeValidator(_id_list)] = Field(
        None,
        max_length=MAX_MEMORY_IDS,
        description="The candidates the user confirmed, by id. Required when memory_find_to_forget offered more than one "
        "candidate (read them out and ask which); may be left out for a single candidate or a forget-everything token.",
    )

    @field_validator("confirm", mode="before")
    @classmethod
    def _only_true_confirms(cls, value: Any) -> bool:
        # Anything but JSON true ("true", 1, "yes") means "not confirmed": the service refuses with its reason.
        return value is True


class ForgetOut(Schema):
    forgotten: int
    memory_ids: list[int]


def forgotten(tombstones: list[Tombstone]) -> dict:
    """ForgetOut from the tombstones forget_request_confirm wrote (here and in the MCP tool)."""
    return {"forgotten": len(tombstones), "memory_ids": [t.memory_id for t in tombstones]}


@router.post("/memories/forget", response={200: ForgetOut, **ERRORS}, url_name="internal-forget")
def forget(request, payload: ForgetIn):
    """`memory.forget`: with the token and ``confirm: true``, forget the candidates the user confirmed (``memory_ids``).

    With more than one candidate ``memory_ids`` is required (400 naming it otherwise, nothing forgotten).
    """
    speaker = lookup(Person, payload.speaker_id, field="speaker_id")
    tombstones = forget_request_confirm(
        token=payload.token, speaker=speaker, confirm=payload.confirm, memory_ids=payload.memory_ids
    )
    return forgotten(tombstones)
