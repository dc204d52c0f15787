"""The assistant's tool schemas (OpenAI function calling), generated from the request schemas of their endpoints.

The assistant fills the session fields (room, speaker, conversation, model location) from its session: the model
never chooses whose memories it reads or writes, so they are not among the tool's parameters.
OpenAI function names allow only [a-zA-Z0-9_-], so memory.remember is named memory_remember.
"""

from dataclasses import dataclass
from typing import Any

from django.urls import reverse
from ninja import Router, Schema

from justai_memory.api.common import ERRORS, Input
from justai_memory.api.learned import MemorySourceIn
from justai_memory.api.memories import FindToForgetIn, ForgetIn, RememberIn

router = Router(tags=["tools"])

SESSION_FIELDS = ["room_id", "speaker_id", "conversation_id", "model_location"]


@dataclass(frozen=True)
class Tool:
    tool: str  # memory.remember
    url_name: str
    schema: type[Input]
    description: str
    hidden: frozenset[str] = frozenset()  # endpoint fields the model cannot know either

    @property
    def name(self) -> str:
        return self.tool.replace(".", "_")


TOOLS = [
    Tool(
        tool="memory.remember",
        url_name="internal-remember",
        schema=RememberIn,
        description=(
            'Remember something for later because the user explicitly asked ("remember ...", '
            '"merk dir ..."). Store one self-contained fact in the user\'s own words and language.'
        ),
        hidden=frozenset({"about_id"}),
    ),
    Tool(
        tool="memory.find_to_forget",
        url_name="internal-find-to-forget",
        schema=FindToForgetIn,
        description=(
            'Find the memories the user wants forgotten ("forget ...", "vergiss ..."). Returns candidates '
            "and a confirmation token: read every candidate to the user and ask which of them to forget "
            '("forget the code" may mean several codes); call memory_forget only after they said which, '
            "with those ids. When the answer says the candidates were withheld, tell the user that "
            "forgetting needs a local model and do not guess what is stored."
        ),
    ),
    Tool(
        tool="memory.forget",
        url_name="internal-forget",
        schema=ForgetIn,
        description=(
            "Forget memories for good, after the user confirmed in the conversation which ones. Needs the token "
            "from memory_find_to_forget and, when it offered more than one candidate, memory_ids: the ids of the "
            "candidates the user chose (without them nothing is forgotten). The content is deleted permanently."
        ),
    ),
    Tool(
        tool="memory.source",
        url_name="internal-memory-source",
        schema=MemorySourceIn,
        description=(
            'Where a memory comes from, when the user asks how you know something ("where did you learn that?", '
            '"woher weißt du das?"): pass the memory as the memory block showed it. Answers with the matching '
            "memories, each with the sentence it was said in, who said it and when (learned_from), or a status "
            "instead (not_shown: the user was not part of that conversation; deleted or redacted: the turn was "
            "removed or a forgotten value was cut from it). Tell the user only that; never guess a source."
        ),
    ),
]


def _plain(schema: dict) -> dict:
    """A property's JSON schema as a tool parameter: no titles, an optional value without its null branch."""
    schema = {
        key: value for key, value in schema.items() if key != "title" and not (key == "default" and value is None)
    }
    variants = schema.pop("anyOf", None)
    if variants is not None:
        [only] = [variant for variant in variants if variant.get("type") != "null"]
        schema = {**_plain(only), **schema}
    if "items" in schema:
        schema["items"] = _plain(schema["items"])
    return schema


def tool_parameters(tool: Tool) -> dict:
    """The tool's parameters: its endpoint's request schema without the session fields and hidden ones."""
    schema = tool.schema.model_json_schema()
    left_out = set(SESSION_FIELDS) | tool.hidden
    return {
        "type": "object",
        "properties": {name: _plain(prop) for name, prop in schema["properties"].items() if name not in left_out},
        "required": [name for name in schema.get("required", []) if name not in left_out],
    }


def tool_schemas() -> dict:
    """``{tools, routes, session_fields}`` as GET /tools answers it."""
    return {
        "tools": [
            {
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": tool_parameters(tool)},
            }
            for tool in TOOLS
        ],
        "routes": {
            tool.name: {"tool": tool.tool, "method": "POST", "path": reverse(f"internal:{tool.url_name}")}
            for tool in TOOLS
        },
        "session_fields": SESSION_FIELDS,
    }


class ToolsOut(Schema):
    tools: list[dict[str, Any]]
    routes: dict[str, dict[str, str]]
    session_fields: list[str]


@router.get("/tools", response={200: ToolsOut, **ERRORS}, url_name="internal-tools")
def tools(request):
    """The tool schemas for the assistant's model, and where each tool call goes."""
    return tool_schemas()
