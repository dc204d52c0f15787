"""Recall, remember and the tool schemas: the internal API the assistant calls before and while it answers."""

from django.http import JsonResponse

from justai_memory.errors import ApplicationError
from justai_memory.internal_api import api_view, read_choice, read_int, read_object, read_str
from memories.models import Kind, Scope
from memories.selectors.recall import CONVERSATION_OTHER_ROOM, MAX_QUERY_CHARS, RecallResult, memory_recall
from memories.services.remember import REMEMBER_SCOPES, memory_remember
from memories.services.store import MAX_CONTENT_CHARS
from people.models import Person, Room
from transcripts.models import Conversation

DEFAULT_LIMIT = 10

# OpenAI function-calling schemas. OpenAI function names allow only [a-zA-Z0-9_-], so the tools
# memory.remember, memory.find_to_forget and memory.forget are named with "_"; ``routes`` maps each
# name to its endpoint. The assistant fills room_id, speaker_id and conversation_id from its session:
# the model never chooses whose memories it reads or writes.
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "memory_remember",
            "description": (
                'Remember something for later because the user explicitly asked ("remember ...", '
                '"merk dir ..."). Store one self-contained fact in the user\'s own words and language.'
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "content": {
                        "type": "string",
                        "maxLength": MAX_CONTENT_CHARS,
                        "description": "The fact as one complete sentence, e.g. 'The spare key for the cellar "
                        "is in the blue tin in the hall.'",
                    },
                    "scope": {
                        "type": "string",
                        "enum": list(REMEMBER_SCOPES),
                        "description": "shared: for the whole household (default); private: only for the "
                        "speaker (needs a recognised speaker); room: only relevant in this room.",
                    },
                    "kind": {
                        "type": "string",
                        "enum": [Kind.FACT, Kind.PREFERENCE, Kind.PROCEDURE, Kind.NOTE],
                        "description": "fact (default), preference, procedure or note.",
                    },
                    "language": {
                        "type": "string",
                        "description": "ISO 639-1 code of the content, e.g. de, en, it (default: the conversation's).",
                    },
                },
                "required": ["content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "memory_find_to_forget",
            "description": (
                'Find the memories the user wants forgotten ("forget ...", "vergiss ..."). Returns candidates '
                "and a confirmation token: read the candidates to the user and ask for confirmation before "
                "calling memory_forget."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to forget, in the user's words."},
                },
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "memory_forget",
            "description": (
                "Forget memories for good, after the user confirmed in the conversation. Needs the token from "
                "memory_find_to_forget; the content is deleted permanently."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "token": {"type": "string", "description": "The token memory_find_to_forget returned."},
                    "confirm": {"type": "boolean", "description": "true only when the user said yes."},
                    "memory_ids": {
                        "type": "array",
                        "items": {"type": "integer"},
                        "description": "Only these of the candidates (default: all candidates).",
                    },
                },
                "required": ["token", "confirm"],
            },
        },
    },
]
ROUTES = {
    "memory_remember": {"tool": "memory.remember", "method": "POST", "path": "/internal/v1/memories/remember"},
    "memory_find_to_forget": {
        "tool": "memory.find_to_forget",
        "method": "POST",
        "path": "/internal/v1/memories/find_to_forget",
    },
    "memory_forget": {"tool": "memory.forget", "method": "POST", "path": "/internal/v1/memories/forget"},
}
SESSION_FIELDS = ["room_id", "speaker_id", "conversation_id"]


@api_view(methods=("GET",))
def tools(request, payload):
    """The tool schemas for the assistant's model, and where each tool call goes."""
    return JsonResponse({"tools": TOOLS, "routes": ROUTES, "session_fields": SESSION_FIELDS})


def _conversation_in(payload: dict, room) -> Conversation | None:
    conversation = read_object(payload, "conversation_id", Conversation, required=False)
    if conversation is not None and conversation.room_id != room.pk:
        raise ApplicationError(CONVERSATION_OTHER_ROOM, field="conversation_id")
    return conversation


def present_recall(result: RecallResult) -> dict:
    return {
        "memories": [
            {
                "id": m.id,
                "content": m.content,
                "language": m.language,
                "kind": m.kind,
                "label": m.label,
                "provenance": m.provenance,
                "scope": m.scope,
                "date": m.date.isoformat(),
                "score": m.score,
            }
            for m in result.memories
        ],
        "prompt": result.prompt,
        "withheld": result.withheld,
        "withheld_reason": result.withheld_reason or None,
        "working_memory": result.working_memory,
    }


@api_view(methods=("POST",))
def recall(request, payload):
    """The memories, prompt block and working memory for the assistant's next answer."""
    query = read_str(payload, "query", max_chars=MAX_QUERY_CHARS)
    room = read_object(payload, "room_id", Room)
    speaker = read_object(payload, "speaker_id", Person, required=False)
    conversation = _conversation_in(payload, room)
    limit = read_int(payload, "limit", required=False)
    result = memory_recall(
        query=query,
        speaker=speaker,
        room=room,
        conversation=conversation,
        limit=DEFAULT_LIMIT if limit is None else limit,
    )
    return JsonResponse(present_recall(result))


@api_view(methods=("POST",))
def remember(request, payload):
    """Store what the speaker asked to remember (confirmed); lifts their forget blocks on it."""
    content = read_str(payload, "content", max_chars=MAX_CONTENT_CHARS)
    room = read_object(payload, "room_id", Room)
    speaker = read_object(payload, "speaker_id", Person, required=False)
    conversation = _conversation_in(payload, room)
    language = read_str(payload, "language", required=False, max_chars=8)
    scope = read_choice(payload, "scope", REMEMBER_SCOPES, default=Scope.SHARED)
    kind = read_choice(payload, "kind", Kind, default=Kind.FACT)
    about = read_object(payload, "about_id", Person, required=False)
    result = memory_remember(
        content=content,
        speaker=speaker,
        room=room,
        language=language,
        conversation_language=conversation.language if conversation is not None else None,
        scope=scope,
        kind=kind,
        about=about,
        source_ref=f"conversation:{conversation.pk}" if conversation is not None else "",
    )
    return JsonResponse(
        {"id": result.memory.pk, "outcome": result.outcome, "lifted_blocks": len(result.lifted_tombstones)},
        status=201,
    )
