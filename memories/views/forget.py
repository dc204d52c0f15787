"""Forgetting, in two steps: find candidates (and a confirmation token), then forget with the token."""

from django.http import JsonResponse

from justai_memory.errors import ApplicationError
from justai_memory.internal_api import api_view, read_object, read_str
from memories.services.forget import MAX_TOKEN_CHARS, forget_request_confirm, forget_request_create
from people.models import Person, Room

MAX_MEMORY_IDS = 100
IDS_NOT_A_LIST = f"'memory_ids' must be a list of at most {MAX_MEMORY_IDS} integer ids."


def _read_ids(payload: dict, field: str) -> list[int] | None:
    value = payload.get(field)
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) > MAX_MEMORY_IDS
        or any(isinstance(pk, bool) or not isinstance(pk, int) for pk in value)
    ):
        raise ApplicationError(IDS_NOT_A_LIST, field=field)
    return value


@api_view(methods=("POST",))
def find_to_forget(request, payload):
    """`memory.find_to_forget`: candidates the speaker may see, and a 10-minute single-use token to confirm with."""
    query = read_str(payload, "query")
    room = read_object(payload, "room_id", Room)
    speaker = read_object(payload, "speaker_id", Person, required=False)
    token, expires_at, candidates = forget_request_create(query=query, speaker=speaker, room=room)
    return JsonResponse(
        {
            "token": token,
            "expires_at": expires_at.isoformat() if expires_at else None,
            "candidates": [{"id": m.pk, "content": m.content, "label": m.label, "scope": m.scope} for m in candidates],
        }
    )


@api_view(methods=("POST",))
def forget(request, payload):
    """`memory.forget`: with the token and ``confirm: true``, forget the candidates (or ``memory_ids`` of them)."""
    token = read_str(payload, "token", max_chars=MAX_TOKEN_CHARS)
    speaker = read_object(payload, "speaker_id", Person, required=False)
    memory_ids = _read_ids(payload, "memory_ids")
    tombstones = forget_request_confirm(
        token=token, speaker=speaker, confirm=payload.get("confirm") is True, memory_ids=memory_ids
    )
    return JsonResponse({"forgotten": len(tombstones), "memory_ids": [t.memory_id for t in tombstones]})
