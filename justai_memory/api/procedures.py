"""Procedures for automations: what the household's learnt behaviour says, as recall would show it."""

from typing import Literal

from ninja import Query, Router, Schema
from ninja.pagination import paginate
from pydantic import Field

from justai_memory.api.caller import LocationSaidOrNone, RoomId, SpeakerId, caller_of
from justai_memory.api.common import ERRORS, Input, IsoDateTime, Page
from memories.models import Kind
from memories.selectors.person import procedures_for

router = Router(tags=["memories"])


class MemoriesQuery(Input):
    model_config = {**Input.model_config, "strict": False}  # query strings are text: "7" is the id 7

    kind: Literal[Kind.PROCEDURE.value] = Field(description="Only procedures can be listed.")
    room_id: RoomId
    speaker_id: SpeakerId = None
    model_location: LocationSaidOrNone = None


class ProcedureOut(Schema):
    id: int
    content: str
    language: str
    label: str
    scope: str
    valid_at: IsoDateTime
    created_at: IsoDateTime


@router.get("/memories", response={200: list[ProcedureOut], **ERRORS}, url_name="internal-memories")
@paginate(Page)
def memories_list(request, filters: Query[MemoriesQuery]):
    """Procedures an automation refers to: active, visible in the room (and to the speaker, if given), oldest first."""
    return procedures_for(caller=caller_of(filters)).defer("embedding")
