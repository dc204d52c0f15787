"""The memory as an MCP server (Streamable HTTP, mounted at /mcp): recall, remember, find_to_forget, forget, source.

Built on the official ``mcp`` SDK (``MCPServer``): it speaks every protocol revision the clients
use (the initialize handshake of Home Assistant and desktop assistants, and the sessionless
2026 revision), derives the tool schemas from the signatures below and turns ``ToolError`` into
an ``isError`` result the model can read. Stateless mode: no session lives in a worker's memory,
so any of the web server's worker processes answers any request (a session-ful transport would
fail whenever a follow-up request lands on another worker). JSON responses: every tool answers
at once, nothing streams.

Who asks, and where, comes from the client's configuration, never from the model: the room
(``X-Room-Id``, required), the speaker (``X-Speaker-Id``, absent = unknown) and where the model
runs (``X-Model-Location``: local or cloud; absent = cloud, so the cloud rule cannot be skipped by
leaving it out). Auth (justai_memory/mcp/auth.py): the JSON API's bearer tokens with those headers, or an
OAuth token whose connection fixes room, speaker and model location (an admin chose them when approving
the client; headers cannot change them) and whether it may only recall. Either way it becomes the caller
context the JSON API resolves too (justai_memory/api/caller.py: one location rule, one message). Each
tool calls the same service as the JSON API and takes the API operation's fields (their types, limits
and descriptions). A result is one text, no structuredContent (docs/decisions/0010-mcp-results-as-text.md):
recall's prompt block; the others the API's answer as compact JSON, built by the same functions
(justai_memory/api/memories.py, justai_memory/api/learned.py).
"""

from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin

from annotated_types import MaxLen, MinLen
from django.db import InterfaceError, OperationalError, close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from ninja import Schema
from pydantic import Field, ValidationError

from connections.models import READ, WRITE
from justai_core.errors import ApplicationError, with_source
from justai_memory import __version__
from justai_memory.api.caller import RequestCaller, caller_of_connection, caller_of_ids
from justai_memory.api.learned import SOURCE_LIMIT_DEFAULT, MemorySourceIn, MemorySourceOut, memory_sources
from justai_memory.api.memories import (
    FindToForgetIn,
    FindToForgetOut,
    ForgetIn,
    ForgetOut,
    RecallIn,
    RememberIn,
    RememberOut,
    candidates_out,
    forgotten,
    remembered,
)
from justai_memory.api.tools import TOOLS
from justai_memory.edge.errors import database_error_answer, validation_messages
from justai_memory.mcp.auth import McpAuth, request_grant
from memories.actors import Actor
from memories.limits import MAX_ID, RECALL_LIMIT_DEFAULT
from memories.models import Kind, Scope
from memories.services.forget import forget_request_confirm, forget_request_create
from memories.services.recall import memory_recall
from memories.services.remember import memory_remember
from people.models import Person, Room

ROOM_HEADER = "X-Room-Id"
SPEAKER_HEADER = "X-Speaker-Id"
MODEL_LOCATION_HEADER = "X-Model-Location"
HEADER_MISSING = "The MCP client must send the header {header} (set it in the client's MCP configuration)."
HEADER_NOT_AN_ID = "The header {header} must be a number (an id from manage.py list_household)."
HEADER_UNKNOWN = "The header {header} names no {what}: there is no {what} with id {pk} (see manage.py list_household)."
# Where an input of the services comes from over MCP (the JSON API's field names, as ApplicationError names them);
# any other field is a tool argument of the same name.
FROM_HEADER = "header {header} of the MCP client's configuration"
HEADER_OF = {
    "room_id": ROOM_HEADER,
    "room": ROOM_HEADER,
    "speaker_id": SPEAKER_HEADER,
    "model_location": MODEL_LOCATION_HEADER,
}
UNKNOWN_WHAT = {"room_id": Room._meta.verbose_name, "speaker_id": Person._meta.verbose_name}
FROM_ARGUMENT = "argument {field}"
FROM_CONNECTION = "chosen when this connection was approved; an admin can approve it again with another choice"

INSTRUCTIONS = (
    "The household's long-term memory. Call memory_recall before answering anything that may depend on what "
    "the household told you earlier; call memory_remember only when the user asks you to remember something; "
    "to forget, call memory_find_to_forget, read the candidates to the user, ask which of them to forget, and "
    "call memory_forget only after they said which, with those memory_ids; when asked where you learnt "
    "something, call memory_source with that memory."
)


SCOPE_MISSING = "This connection may only recall: an admin can allow remembering and forgetting (Connections)."


def scope_needed(annotations: ToolAnnotations | None) -> str:
    """The OAuth scope a tool needs: memory:read for a read-only tool, memory:write for any other."""
    return READ if annotations is not None and annotations.read_only_hint else WRITE


class MemoryServer(MCPServer):
    """The SDK's server, with argument errors in the JSON API's words ("'scope' must be one of: shared, room,
    private.") instead of pydantic's report (its type names, the value sent and an errors.pydantic.dev link),
    and with the tools a grant's scopes allow: a connection approved for recall only neither sees nor calls
    the others."""

    async def _handle_list_tools(self, ctx, params):
        listed = await super()._handle_list_tools(ctx, params)
        grant = request_grant(ctx.request)
        scopes = grant.scopes if grant is not None else frozenset()
        listed.tools = [tool for tool in listed.tools if scope_needed(tool.annotations) in scopes]
        return listed

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        # Every call over HTTP comes with its context (the SDK's handler); a call in this process has none.
        tool = self._tool_manager.get_tool(name)
        if context is not None and tool is not None:
            grant = request_grant(context.request_context.request)
            if grant is None or scope_needed(tool.annotations) not in grant.scopes:
                raise ToolError(SCOPE_MISSING)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # The SDK's Tool.run raises a ToolError from the ValidationError of the arguments, and only then: a
            # ValidationError inside a tool is a crash (UnexpectedToolError), ours carry no cause.
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            # Caused by the ValidationError still: the SDK logs its field names (never the values sent).
            raise ToolError(f"Error executing tool {name}: {validation_messages(exc.__cause__)}") from exc.__cause__


server = MemoryServer("justai-memory", version=__version__, instructions=INSTRUCTIONS)


def _header_id(headers, header: str, *, required: bool) -> int | None:
    """The id a header names (None when it is absent and may be): a tool error when it is missing or no id."""
    value = (headers.get(header) or "").strip()
    if not value:
        if required:
            raise ToolError(HEADER_MISSING.format(header=header))
        return None
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_ID:
        raise ToolError(HEADER_NOT_AN_ID.format(header=header))
    return int(value)


def caller_of_request(ctx: Context) -> RequestCaller:
    """The caller of one MCP request (the shared context, justai_memory/api/caller.py): an OAuth connection's,
    or the one the headers name. No ``X-Model-Location`` (or an empty one) is cloud: the rule cannot be
    skipped by leaving it out; any other value than ``local`` or ``cloud`` (``Local`` too, as the API refuses it)
    is the rule's message with the header as the source."""
    grant = request_grant(ctx.request_context.request)  # MemoryServer.call_tool checked that there is one
    if grant.connection is not None:
        return caller_of_connection(grant.connection)
    headers = ctx.headers or {}
    room_id = _header_id(headers, ROOM_HEADER, required=True)
    speaker_id = _header_id(headers, SPEAKER_HEADER, required=False)
    # Read as the API reads its field: "local" or "cloud" exactly ("Local" is refused alike); the spaces around a
    # header's value are the header's syntax, not part of it.
    said = (headers.get(MODEL_LOCATION_HEADER) or "").strip()
    try:
        return caller_of_ids(
            room_id=room_id, speaker_id=speaker_id, model_location=said or None, location_required=False
        )
    except ApplicationError as exc:
        header = HEADER_OF[exc.field]
        if exc.status == 404:
            what = UNKNOWN_WHAT[exc.field]
            pk = room_id if exc.field == "room_id" else speaker_id
            raise ToolError(HEADER_UNKNOWN.format(header=header, what=what, pk=pk)) from None
        raise ToolError(with_source(exc.message, FROM_HEADER.format(header=header))) from None


def source_of(caller: RequestCaller, field: str) -> str:
    """Where this request's ``field`` (named as the JSON API names it) comes from, for a tool error."""
    if field in HEADER_OF:
        return FROM_CONNECTION if caller.connection is not None else FROM_HEADER.format(header=HEADER_OF[field])
    return FROM_ARGUMENT.format(field=field)


def tool_error(caller: RequestCaller, exc: ApplicationError) -> ToolError:
    """A service's error as the model reads it: its message and where the input at fault comes from."""
    field = exc.needs or exc.field
    return ToolError(with_source(exc.message, source_of(caller, field)) if field else exc.message)


def _served(fn: Callable[[RequestCaller], Any], ctx: Context) -> Any:
    """Run one tool call in its worker thread: the caller from the connection or headers, service errors as
    tool errors.

    The thread's database connection is handed back afterwards (as Django does at the end of a
    request), so tool calls never hold more connections than the pool allows.
    """
    close_old_connections()
    try:
        caller = caller_of_request(ctx)
        try:
            return fn(caller)
        except ApplicationError as exc:
            raise tool_error(caller, exc) from None
    except (OperationalError, InterfaceError) as exc:  # busy or unreachable, in the JSON API's words
        raise ToolError(database_error_answer(exc)[0]) from None
    finally:
        close_old_connections()


def _param(schema, field: str) -> Any:
    """The type of the JSON API's ``schema.field`` for a tool parameter: its constraints and description.

    A list's length limit is left out of the schema (checked by the field's own validator all the same):
    Home Assistant converts tool schemas with voluptuous-openapi, which refuses ``minItems``/``maxItems``,
    and one refused keyword keeps every tool of the server from it.
    """
    info = schema.model_fields[field]
    is_list = any(get_origin(option) is list for option in (info.annotation, *get_args(info.annotation)))
    metadata = [m for m in info.metadata if not (is_list and isinstance(m, MinLen | MaxLen))]
    return Annotated[info.annotation, *metadata, Field(description=info.description)]


def _tool(name: str) -> str:
    """The description the JSON API's tool schema gives this tool."""
    return next(tool.description for tool in TOOLS if tool.name == name)


def _answer(schema: type[Schema], answer: dict) -> str:
    """A tool's result: the JSON API's answer as compact JSON text, the one form every client reads (no
    structuredContent next to it: Home Assistant hands both to its model; docs/decisions/0010)."""
    return schema.model_validate(answer).model_dump_json()


def _annotations(title: str, **hints: bool) -> dict:
    """A tool's title, in both places clients read it (``Tool.title`` since the 2025-06-18 revision,
    ``annotations.title`` before), and its behaviour hints. Every tool works on the household's memory
    alone, nothing outside it: ``openWorldHint`` false."""
    # structured_output=False: no outputSchema, the text is the result (docs/decisions/0010-mcp-results-as-text.md).
    return {
        "title": title,
        "annotations": ToolAnnotations(title=title, open_world_hint=False, **hints),
        "structured_output": False,
    }


# Read-only: recall changes no memory (it counts the access, bookkeeping the household does not see as a
# change). find_to_forget is read-only too: it stores a 10-minute single-use token (its hash and the
# candidate ids), which changes nothing by itself; memory_forget is the step that changes something, and
# clients that ask before running a tool that is not read-only then ask once, for memory_forget, not for
# looking up what could be forgotten.
READ_ONLY = {"read_only_hint": True}


@server.tool(
    name="memory_recall",
    **_annotations("Recall from the household's memory", **READ_ONLY),
    description="What the household's memory knows that is relevant to the query, as a block to answer from: one "
    "line per memory with its origin (confirmed, observed, from conversation, GUESS) and date, or why memories were "
    "withheld. Call it before answering anything that may depend on what the household told you earlier.",
)
def recall(
    query: _param(RecallIn, "query"), ctx: Context, limit: _param(RecallIn, "limit") = RECALL_LIMIT_DEFAULT
) -> str:
    # The prompt block alone: it holds every memory's text, origin and date (and the withheld notice); the
    # JSON API's other fields (ids, scores, why each was found) are for programs, and no tool takes a recall id.
    def run(caller: RequestCaller) -> str:
        return memory_recall(query=query, caller=caller, limit=limit).prompt

    return _served(run, ctx)


# Not destructive: it adds a memory, or merges the same fact into the memory that holds it; the forget blocks it
# lifts are the speaker's own, on this very content. Idempotent: the same sentence again merges into the memory
# the first call made.
@server.tool(
    name="memory_remember",
    description=_tool("memory_remember"),
    **_annotations("Remember", read_only_hint=False, destructive_hint=False, idempotent_hint=True),
)
def remember(
    content: _param(RememberIn, "content"),
    ctx: Context,
    scope: _param(RememberIn, "scope") = Scope.SHARED.value,
    kind: _param(RememberIn, "kind") = Kind.FACT.value,
    language: _param(RememberIn, "language") = None,
) -> str:
    def run(caller: RequestCaller) -> str:
        result = memory_remember(
            content=content,
            caller=caller,
            language=language,
            scope=scope,
            kind=kind,
            # Through an OAuth connection: that connection, so that what a client wrote can be found.
            source_ref=caller.connection.source_ref if caller.connection is not None else "mcp",
            actor=Actor.through(caller.connection, caller.speaker),
        )
        return _answer(RememberOut, remembered(result))

    return _served(run, ctx)


@server.tool(
    name="memory_find_to_forget",
    description=_tool("memory_find_to_forget"),
    **_annotations("Find what to forget", **READ_ONLY),
)
def find_to_forget(query: _param(FindToForgetIn, "query"), ctx: Context) -> str:
    def run(caller: RequestCaller) -> str:
        found = forget_request_create(query=query, caller=caller)
        return _answer(FindToForgetOut, candidates_out(found))

    return _served(run, ctx)


@server.tool(
    name="memory_source",
    description=_tool("memory_source"),
    **_annotations("Where a memory comes from", **READ_ONLY),
)
def source(
    query: _param(MemorySourceIn, "query"), ctx: Context, limit: _param(MemorySourceIn, "limit") = SOURCE_LIMIT_DEFAULT
) -> str:
    def run(caller: RequestCaller) -> str:
        return _answer(MemorySourceOut, memory_sources(caller=caller, query=query, limit=limit))

    return _served(run, ctx)


# Destructive: the content is deleted for good. Idempotent: the token is single-use, so the same call again
# forgets nothing more (it answers that the token was used).
@server.tool(
    name="memory_forget",
    description=_tool("memory_forget"),
    **_annotations("Forget", read_only_hint=False, destructive_hint=True, idempotent_hint=True),
)
def forget(
    token: _param(ForgetIn, "token"),
    confirm: _param(ForgetIn, "confirm"),  # no default here: the model says it, every time
    ctx: Context,
    memory_ids: _param(ForgetIn, "memory_ids") = None,
) -> str:
    def run(caller: RequestCaller) -> str:
        tombstones = forget_request_confirm(
            token=token,
            speaker=caller.speaker,
            confirm=confirm,
            memory_ids=memory_ids,
            actor=Actor.through(caller.connection, caller.speaker),
        )
        return _answer(ForgetOut, forgotten(tombstones))

    return _served(run, ctx)


# The SDK's transport with its session manager (stateless, JSON answers). The SDK's own Host/Origin
# check is off: the host is checked against Django's ALLOWED_HOSTS by McpAuth, one rule for the whole site.
server.streamable_http_app(
    stateless_http=True,
    json_response=True,
    transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)
# The ASGI app for /mcp (justai_memory/serving/asgi.py mounts it); its session manager runs in asgi.py's lifespan.
application = McpAuth(StreamableHTTPASGIApp(server.session_manager))
session_manager = server.session_manager
