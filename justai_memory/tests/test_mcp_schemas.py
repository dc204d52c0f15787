"""The MCP tools take what the JSON API does (their JSON schemas are the API's, field by field), with titles,
hints and argument errors in the API's words."""

import asyncio
import re

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from voluptuous_openapi import convert_to_voluptuous

from justai_memory.api.main import api
from justai_memory.mcp import server as mcp_server

# Per tool: the API operation, and the API's input fields the tool does not take (who asks and where come
# from the MCP client's headers; the MCP client keeps its own conversation) or answer fields it leaves out.
TOOLS = {
    "memory_recall": ("/internal/v1/recall", {"room_id", "speaker_id", "conversation_id", "model_location"}),
    "memory_remember": ("/internal/v1/memories/remember", {"room_id", "speaker_id", "conversation_id", "about_id"}),
    "memory_find_to_forget": (
        "/internal/v1/memories/find_to_forget",
        {"room_id", "speaker_id", "conversation_id", "model_location"},
    ),
    "memory_forget": ("/internal/v1/memories/forget", {"speaker_id"}),
    "memory_source": (
        "/internal/v1/memories/source",
        {"room_id", "speaker_id", "conversation_id", "model_location"},
    ),
}


def resolved(schema, defs: dict):
    """``schema`` with every ``$ref`` replaced by what it names, without titles (names differ, not fields) and
    without date-time formats (the OpenAPI document shows an answer's datetime as it is sent, a plain string;
    the SDK publishes the format too)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return resolved(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
        if schema.get("format") == "date-time":
            schema = {key: value for key, value in schema.items() if key != "format"}
        return {key: resolved(value, defs) for key, value in schema.items() if key not in ("title", "$defs")}
    if isinstance(schema, list):
        return [resolved(item, defs) for item in schema]
    return schema


@pytest.fixture(scope="module")
def schemas():
    document = api.get_openapi_schema()
    defs = document["components"]["schemas"]
    operations = {
        path: resolved(methods["post"], defs) for path, methods in document["paths"].items() if "post" in methods
    }
    tools = {tool.name: tool for tool in asyncio.run(mcp_server.server.list_tools())}
    return operations, tools


@pytest.mark.parametrize("name", TOOLS)
def test_a_tools_parameters_are_the_api_fields_less_those_from_headers(schemas, name):
    operations, tools = schemas
    path, from_headers = TOOLS[name]
    expected = operations[path]["requestBody"]["content"]["application/json"]["schema"]["properties"]
    tool = resolved(tools[name].input_schema, tools[name].input_schema.get("$defs", {}))
    assert set(tool["properties"]) == set(expected) - from_headers
    for field, schema in tool["properties"].items():
        api_field = {"default": None, **expected[field]}  # the OpenAPI document leaves null defaults out
        if "default" not in schema:  # required of the model (forget's confirm) where the API has a default
            assert field in tool["required"]
            api_field.pop("default", None)
        assert schema == without_list_lengths(api_field), field


def without_list_lengths(schema):
    """``schema`` without minItems/maxItems: a tool's list parameter leaves its length limit to the validator
    (mcp_server._param; Home Assistant's schema converter refuses the two keywords)."""
    if isinstance(schema, dict):
        return {k: without_list_lengths(v) for k, v in schema.items() if k not in ("minItems", "maxItems")}
    if isinstance(schema, list):
        return [without_list_lengths(item) for item in schema]
    return schema


@pytest.mark.parametrize("name", TOOLS)
def test_a_tool_publishes_no_output_schema(schemas, name):
    # A result is one text (docs/decisions/0010): with an outputSchema the SDK's client refuses a result without
    # structuredContent, and structuredContent next to the text makes Home Assistant's model read it twice.
    _, tools = schemas
    assert tools[name].output_schema is None


# What a client reads to decide whether to ask before a call (Home Assistant, desktop assistants): per tool its
# title, and read-only / destructive / idempotent.
HINTS = {
    "memory_recall": ("Recall from the household's memory", True, None, None),
    "memory_remember": ("Remember", False, False, True),
    "memory_find_to_forget": ("Find what to forget", True, None, None),
    "memory_forget": ("Forget", False, True, True),
    "memory_source": ("Where a memory comes from", True, None, None),
}


@pytest.mark.parametrize("name", TOOLS)
def test_a_tool_has_a_title_and_hints_and_every_parameter_a_description(schemas, name):
    _, tools = schemas
    tool = tools[name]
    title, read_only, destructive, idempotent = HINTS[name]
    hints = tool.annotations
    assert (tool.title, hints.title) == (title, title)
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint) == (read_only, destructive, idempotent)
    assert hints.open_world_hint is False  # the household's memory, nothing outside it
    for field, schema in tool.input_schema["properties"].items():
        assert schema.get("description"), field


def test_the_instructions_name_the_tools_as_the_client_lists_them(schemas):
    _, tools = schemas
    named = set(re.findall(r"\bmemory_\w+", mcp_server.INSTRUCTIONS)) - {"memory_ids"}  # forget's argument
    assert named == set(tools)
    # No bare name of a tool the client does not list ("call recall", "call forget").
    assert not re.search(r"\bcall (recall|remember|find_to_forget|forget)\b", mcp_server.INSTRUCTIONS)


BAD_ARGUMENTS = [
    ("memory_remember", {"content": "x", "scope": "public"}, "'scope' must be one of: shared, room, private."),
    ("memory_remember", {}, "'content' is required."),
    ("memory_recall", {"query": "x", "limit": 0}, "'limit' must be at least 1."),
    ("memory_recall", {"query": "x", "limit": "many"}, "'limit' must be an integer."),
    ("memory_forget", {"token": "t", "confirm": True, "memory_ids": [1, "x"]}, "'memory_ids' must be a list of at"),
    # Longer than the limit the schema leaves out: the field's validator still refuses it.
    (
        "memory_forget",
        {"token": "t", "confirm": True, "memory_ids": list(range(1, 102))},
        "'memory_ids' must be a list of at most 100",
    ),
]


@pytest.mark.parametrize(("name", "arguments", "message"), BAD_ARGUMENTS, ids=[repr(c[1]) for c in BAD_ARGUMENTS])
def test_bad_arguments_are_refused_in_the_json_apis_words(name, arguments, message):
    # Refused before the tool runs (no database, no headers needed): the argument errors of the SDK's validation.
    with pytest.raises(ToolError) as excinfo:
        asyncio.run(mcp_server.server.call_tool(name, arguments))
    text = str(excinfo.value)
    assert text.startswith(f"Error executing tool {name}: {message}"), text
    # None of pydantic's report: its model and type names, the value sent, its documentation link.
    assert not re.search(r"pydantic|validation error for|Input should|Scope\.|input_value|type=", text), text


@pytest.mark.parametrize("name", TOOLS)
def test_home_assistant_can_convert_every_tools_schema(schemas, name):
    """Home Assistant turns each tool's input schema into a voluptuous schema with voluptuous-openapi (the
    version it pins); one keyword it refuses (minItems, maxItems, allOf, ...) keeps every tool from it."""
    _operations, tools = schemas
    convert_to_voluptuous(tools[name].input_schema)
