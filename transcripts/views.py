"""The transcripts part of the internal JSON API: conversations, turns, working memory, sightings, events, observations.

Views parse, call one service or selector, present.
"""

from django.http import JsonResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from justai_memory.errors import ApplicationError
from justai_memory.internal_api import api_view, read_choice, read_object, read_str
from memories.models import Kind, Scope
from memories.services.store import StoreOutcome
from people.models import Person, Room
from transcripts.models import Conversation, Event, ModelLocation
from transcripts.selectors import working_memory
from transcripts.services.conversations import TurnDraft, conversation_end, conversation_start, turns_append
from transcripts.services.ingest import event_record, memory_observe, sighting_record


def _read_datetime(payload: dict, field: str):
    """An ISO 8601 time (a time without zone is the household's); None when absent."""
    value = payload.get(field)
    if value is None:
        return None
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise ApplicationError(f"'{field}' must be an ISO 8601 date and time.", field=field)
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


def _read_unit(payload: dict, field: str, default: float) -> float:
    value = payload.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ApplicationError(f"'{field}' must be a number from 0 to 1.", field=field)
    return float(value)


def _conversation(conversation_id: int) -> Conversation:
    conversation = Conversation.objects.select_related("speaker").filter(pk=conversation_id).first()
    if conversation is None:
        raise ApplicationError(f"No conversation with id {conversation_id}.", field="conversation_id", status=404)
    return conversation


@api_view(methods=("POST",))
def conversations_create(request, payload):
    """Start a conversation: ``{room_id, speaker_id?, language, model_location}`` -> 201 ``{id}``."""
    conversation = conversation_start(
        room=read_object(payload, "room_id", Room),
        speaker=read_object(payload, "speaker_id", Person, required=False),
        language=read_str(payload, "language", max_chars=8),
        model_location=read_choice(payload, "model_location", ModelLocation, default=ModelLocation.LOCAL),
    )
    return JsonResponse({"id": conversation.pk}, status=201)


@api_view(methods=("POST",))
def conversation_turns(request, payload, conversation_id: int):
    """Append turns: ``{turns: [{role, text, speaker_id?}]}`` -> 201 ``{added}``."""
    conversation = _conversation(conversation_id)
    raw_turns = payload.get("turns")
    if not isinstance(raw_turns, list):
        raise ApplicationError("'turns' must be a list of {role, text, speaker_id?}.", field="turns")
    drafts = []
    for i, raw in enumerate(raw_turns):
        if not isinstance(raw, dict):
            raise ApplicationError("Each turn must be an object.", field=f"turns[{i}]")
        try:
            drafts.append(
                TurnDraft(
                    role=read_str(raw, "role", max_chars=16),
                    text=read_str(raw, "text"),
                    speaker=read_object(raw, "speaker_id", Person, required=False),
                )
            )
        except ApplicationError as exc:
            raise ApplicationError(exc.message, field=f"turns[{i}].{exc.field}", status=exc.status) from exc
    added = turns_append(conversation=conversation, turns=drafts)
    return JsonResponse({"added": len(added)}, status=201)


@api_view(methods=("POST",))
def conversation_end_view(request, payload, conversation_id: int):
    """End a conversation and queue its extraction -> ``{id, extraction_status}``."""
    conversation = conversation_end(conversation=_conversation(conversation_id))
    return JsonResponse({"id": conversation.pk, "extraction_status": conversation.extraction_status})


@api_view(methods=("GET",))
def conversation_working_memory(request, payload, conversation_id: int):
    """The last 30 turns, oldest first -> ``{turns: [{role, speaker_id, text, at}]}``."""
    return JsonResponse({"turns": working_memory(conversation=_conversation(conversation_id))})


@api_view(methods=("POST",))
def sightings_create(request, payload):
    """A person seen in a room: ``{person_id, room_id, seen_at?}`` -> 201 ``{id}``."""
    sighting = sighting_record(
        person=read_object(payload, "person_id", Person),
        room=read_object(payload, "room_id", Room),
        seen_at=_read_datetime(payload, "seen_at"),
    )
    return JsonResponse({"id": sighting.pk}, status=201)


@api_view(methods=("POST",))
def events_create(request, payload):
    """A household event: ``{kind, payload?, room_id?, person_id?, occurred_at?}`` -> 201 ``{id}``."""
    event = event_record(
        kind=read_str(payload, "kind", max_chars=64),
        payload=payload.get("payload"),
        room=read_object(payload, "room_id", Room, required=False),
        person=read_object(payload, "person_id", Person, required=False),
        occurred_at=_read_datetime(payload, "occurred_at"),
    )
    return JsonResponse({"id": event.pk}, status=201)


@api_view(methods=("POST",))
def memories_observe(request, payload):
    """An observed memory: ``{content, language?, event_id?, kind?, scope?, room_id?, owner_id?, about_id?, confidence?, importance?}``.

    201 ``{id, outcome: "created"|"merged"}``; 200 ``{id: null, outcome: "blocked"}`` when it was forgotten before.
    """
    result = memory_observe(
        content=read_str(payload, "content"),
        language=read_str(payload, "language", required=False, max_chars=8),
        event=read_object(payload, "event_id", Event, required=False),
        kind=read_choice(payload, "kind", Kind, default=Kind.FACT),
        scope=read_choice(payload, "scope", Scope, default=Scope.SHARED),
        room=read_object(payload, "room_id", Room, required=False),
        owner=read_object(payload, "owner_id", Person, required=False),
        about=read_object(payload, "about_id", Person, required=False),
        confidence=_read_unit(payload, "confidence", 1.0),
        importance=_read_unit(payload, "importance", 0.5),
    )
    if result.outcome == StoreOutcome.BLOCKED:
        return JsonResponse({"id": None, "outcome": result.outcome})
    return JsonResponse({"id": result.memory.pk, "outcome": result.outcome}, status=201)
