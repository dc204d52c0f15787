"""Where a memory was learnt: a memory's detail, and "where did you learn that?" for the assistant's model.

Both answer with the memory and ``learned_from``: the sentence(s) it was said in, who said them and
when (the turns its extraction cited). Only for a memory the caller may see as recall does (visible
to the speaker in the room, active; anything else, forgotten included, is the same 404), only for a
model the cloud rule lets read memories, and a sentence only to a speaker who was party to its
conversation (transcripts.selectors.memory_learned_from, docs/privacy.md).
"""

from typing import Literal

from ninja import Query, Router, Schema
from pydantic import Field

from justai_memory.api.caller import CallerIn, RequestCaller, caller_of
from justai_memory.api.common import ERRORS, Id, Integer, IsoDateTime, Text, lookup
from memories.limits import RECALL_LIMIT_MAX
from memories.models import Memory
from memories.selectors.recall import memories_readable, recall_candidates
from memories.services.recall import memory_recall
from transcripts.selectors import memory_learned_from

router = Router(tags=["memories"])

SOURCE_LIMIT_DEFAULT = 3


class LearnedFromOut(Schema):
    turn_id: int
    status: Literal["said", "redacted", "deleted", "not_shown"] = Field(
        description="said: the sentence, who said it and when; redacted: the same as the turn reads since a forget "
        "redacted it ([forgotten] where a value was); deleted: the turn is gone; not_shown: the caller's speaker was "
        "not party to that conversation, so its sentence, speaker and time are not shown."
    )
    text: str | None = Field(description="The sentence of the turn closest to the memory (null unless said/redacted).")
    speaker_id: int | None
    speaker: str | None = Field(description="Who said it, by name (null: an unknown speaker, or not shown).")
    at: IsoDateTime | None


class MemoryDetailOut(Schema):
    id: int
    content: str
    language: str
    kind: str
    label: str
    scope: str
    date: IsoDateTime
    source: str = Field(
        description="How it was learnt: session (taken from a conversation), tool (remembered when asked), event, admin."
    )
    learned_at: IsoDateTime = Field(description="When it was stored.")
    learned_from: list[LearnedFromOut] = Field(
        description="The turns it was said in (extracted memories); empty when none were recorded or kept."
    )


def memory_detail(memory: Memory, caller: RequestCaller) -> dict:
    """MemoryDetailOut's fields for ``memory`` as ``caller`` may read them."""
    return {
        "id": memory.pk,
        "content": memory.content,
        "language": memory.language,
        "kind": memory.kind,
        "label": memory.label,
        "scope": memory.scope,
        "date": memory.valid_at,
        "source": memory.source,
        "learned_at": memory.created_at,
        "learned_from": memory_learned_from(memory=memory, speaker=caller.speaker),
    }


class MemoryQuery(CallerIn):
    model_config = {**CallerIn.model_config, "strict": False}  # query strings are text: "7" is the id 7


@router.get("/memories/{int:memory_id}", response={200: MemoryDetailOut, **ERRORS}, url_name="internal-memory")
def memory_get(request, memory_id: Id, asked: Query[MemoryQuery]):
    """A memory the speaker may see in the room, with where it was learnt (404 for any other: none, forgotten, not
    visible to them). A cloud model gets 403 with the reason unless the household allows it."""
    caller = caller_of(asked)
    memory = lookup(Memory, memory_id, field="memory_id", queryset=memories_readable(caller=caller))
    return memory_detail(memory, caller)


class MemorySourceIn(CallerIn):
    query: Text = Field(
        description="The memory the user asks about, in the words the memory block showed it (or the user's question)."
    )
    limit: Integer = Field(
        SOURCE_LIMIT_DEFAULT,
        ge=1,
        le=RECALL_LIMIT_MAX,
        description=f"How many of the matching memories to answer for (1 to {RECALL_LIMIT_MAX}, default "
        f"{SOURCE_LIMIT_DEFAULT}), best match first.",
    )


class MemorySourceOut(Schema):
    memories: list[MemoryDetailOut]
    withheld: bool = Field(description="true: the cloud rule kept the memories from this model.")
    withheld_reason: str | None


def memory_sources(*, caller: RequestCaller, query: str, limit: int) -> dict:
    """MemorySourceOut: the memories recall finds for ``query`` (counted as no access), each with where it was
    learnt; withheld as recall withholds (here and in the MCP tool)."""
    result = memory_recall(query=query, caller=caller, limit=limit, record_access=False)
    if result.withheld:
        return {"memories": [], "withheld": True, "withheld_reason": result.withheld_reason}
    ids = [found.id for found in result.memories]
    rows = recall_candidates(speaker=caller.speaker, room=caller.room).defer("embedding").in_bulk(ids)
    details = [memory_detail(rows[pk], caller) for pk in ids if pk in rows]
    return {"memories": details, "withheld": False, "withheld_reason": None}


@router.post("/memories/source", response={200: MemorySourceOut, **ERRORS}, url_name="internal-memory-source")
def memory_source(request, payload: MemorySourceIn):
    """`memory.source`: "where did you learn that?": the memories the query is about, each with the sentence it was
    said in, who said it and when (as the caller may see them); read-only."""
    caller = caller_of(payload)
    return memory_sources(caller=caller, query=payload.query, limit=payload.limit)
