"""One caller context (justai_memory/api/caller.py): the JSON API and the MCP server resolve room, speaker,
conversation and model location by the same rule and the same message, and services get the resolved values.

The MCP side runs in this process: the tool functions with a request context as the SDK hands it over
(the grant McpAuth found, the client's headers); test_mcp.py drives the same through a served /mcp.
"""

from types import SimpleNamespace

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from connections.models import Connection
from justai_core.errors import ApplicationError, with_source
from justai_core.locations import CLOUD, LOCAL
from justai_memory.api.caller import caller_of_connection, caller_of_ids
from justai_memory.mcp import server as mcp_server
from justai_memory.mcp.auth import ALL_SCOPES, CALLER_KEY, Grant
from memories.models import ForgetRequest
from memories.selectors.privacy import FORGET_NEEDS_LOCAL, MODEL_LOCATION_INVALID, MODEL_LOCATION_REQUIRED
from memories.services.forget import forget_request_create
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db

FACT = "Der Müll wird am Dienstag abgeholt."
QUESTION = "Wann wird der Müll abgeholt?"


@pytest.fixture(autouse=True)
def _in_the_tests_transaction(monkeypatch):
    # A tool hands its thread's database connection back after each call; here that is the test's connection.
    monkeypatch.setattr(mcp_server, "close_old_connections", lambda: None)


def mcp_context(headers: dict, connection: Connection | None = None):
    """A tool call's context as the SDK hands it to a tool: the HTTP request (with McpAuth's grant) and its headers."""
    request = SimpleNamespace(scope={CALLER_KEY: Grant(scopes=ALL_SCOPES, connection=connection)})
    return SimpleNamespace(request_context=SimpleNamespace(request=request), headers=headers)


def mcp_recall(headers: dict, connection: Connection | None = None) -> str:
    return mcp_server.recall(query=QUESTION, ctx=mcp_context(headers, connection))


def api_recall(api, **fields):
    return api.post("/internal/v1/recall", {"query": QUESTION, **fields})


# (what the caller says, what a conversation or connection stored) -> where the model runs
RULE = [
    ("local", None, LOCAL),
    ("cloud", None, CLOUD),
    ("local", LOCAL, LOCAL),
    ("cloud", LOCAL, CLOUD),
    ("local", CLOUD, CLOUD),
    (None, LOCAL, LOCAL),
    (None, CLOUD, CLOUD),
    (None, "", CLOUD),  # a stored location other than local is cloud
]


@pytest.mark.parametrize(("said", "stored", "expected"), RULE)
def test_the_api_and_mcp_resolve_the_model_location_by_the_one_rule(said, stored, expected):
    room = RoomFactory()
    if stored is not None:
        if stored:  # a conversation's column refuses anything but local and cloud
            conversation = ConversationFactory(room=room, model_location=stored)
            api = caller_of_ids(room_id=room.pk, conversation_id=conversation.pk, model_location=said)
            assert (api.room, api.conversation, api.model_location) == (room, conversation, expected)
        # An approved connection's location is stored; the client's header cannot change it.
        if said is None:
            connection = Connection(room=room, speaker=None, model_location=stored)
            assert caller_of_connection(connection).model_location == expected
    else:
        api = caller_of_ids(room_id=room.pk, model_location=said)
        mcp = caller_of_ids(room_id=room.pk, model_location=said, location_required=False)
        assert api.model_location == mcp.model_location == expected


def test_a_location_nobody_said_fails_closed_on_every_surface(api):
    """Nothing said, nothing stored: the API's caller has a field to say it in and gets a 400 naming it (recall,
    find_to_forget, POST /conversations); MCP's header may be left out of a client's configuration and is cloud,
    so memories are withheld. Neither surface reads memory text for a model whose location nobody said."""
    room, anna = RoomFactory(), PersonFactory()
    MemoryFactory(content=FACT, language="de")
    for path, body in (
        ("/internal/v1/recall", {"query": QUESTION}),
        ("/internal/v1/memories/find_to_forget", {"query": "Vergiss den Müll"}),
        ("/internal/v1/conversations", {"language": "de"}),
    ):
        refused = api.post(path, {"room_id": room.pk, "speaker_id": anna.pk, **body})
        assert (refused.status_code, refused.json()["field"]) == (400, "model_location"), path
        assert "Dienstag" not in refused.content.decode()
    assert api_recall(api, room_id=room.pk, model_location=None).json()["error"] == MODEL_LOCATION_REQUIRED
    assert not Conversation.objects.exists() and not ForgetRequest.objects.exists()
    withheld = mcp_recall({"X-Room-Id": str(room.pk), "X-Speaker-Id": str(anna.pk)})
    assert "withheld" in withheld and "Dienstag" not in withheld
    assert "Dienstag" in mcp_recall({"X-Room-Id": str(room.pk), "X-Model-Location": "local"})


def test_a_location_the_rule_refuses_has_one_message_on_every_surface(api):
    room = RoomFactory()
    for path, body in (
        ("/internal/v1/recall", {"query": QUESTION}),
        ("/internal/v1/memories/find_to_forget", {"query": "Vergiss den Müll"}),
        ("/internal/v1/conversations", {"language": "de"}),
    ):
        refused = api.post(path, {"room_id": room.pk, "model_location": "mars", **body})
        assert refused.json() == {"error": MODEL_LOCATION_INVALID, "field": "model_location"}, path
        assert refused.status_code == 400
    # The API's schema refuses it in the rule's words; the MCP header gets them too, with its source.
    with pytest.raises(ToolError) as mcp_refused:
        mcp_recall({"X-Room-Id": str(room.pk), "X-Model-Location": "mars"})
    source = mcp_server.FROM_HEADER.format(header=mcp_server.MODEL_LOCATION_HEADER)
    assert str(mcp_refused.value) == with_source(MODEL_LOCATION_INVALID, source)
    with pytest.raises(ApplicationError) as api_refused:
        caller_of_ids(room_id=room.pk, model_location="mars")
    assert api_refused.value.message == MODEL_LOCATION_INVALID and api_refused.value.field == "model_location"


def test_mcp_header_errors_keep_their_words_and_name_the_header():
    room = RoomFactory()
    cases = [
        ({}, mcp_server.HEADER_MISSING.format(header="X-Room-Id")),
        ({"X-Room-Id": "kitchen"}, mcp_server.HEADER_NOT_AN_ID.format(header="X-Room-Id")),
        ({"X-Room-Id": "999999"}, mcp_server.HEADER_UNKNOWN.format(header="X-Room-Id", what="room", pk=999999)),
        (
            {"X-Room-Id": str(room.pk), "X-Speaker-Id": "999999"},
            mcp_server.HEADER_UNKNOWN.format(header="X-Speaker-Id", what="person", pk=999999),
        ),
    ]
    for headers, message in cases:
        with pytest.raises(ToolError) as refused:
            mcp_recall(headers)
        assert str(refused.value) == message, headers


def test_an_oauth_connection_fixes_the_caller_whatever_the_headers_say():
    kitchen, hall, anna = RoomFactory(), RoomFactory(), PersonFactory()
    MemoryFactory(content=FACT, language="de")
    connection = Connection(room=kitchen, speaker=anna, model_location=CLOUD)
    caller = caller_of_connection(connection)
    assert (caller.room, caller.speaker, caller.model_location, caller.connection) == (kitchen, anna, CLOUD, connection)
    said_local = mcp_recall({"X-Room-Id": str(hall.pk), "X-Model-Location": "local"}, connection=connection)
    assert "withheld" in said_local and "Dienstag" not in said_local


def test_a_service_takes_the_resolved_location_and_never_resolves_it_again():
    """forget's service is handed the caller's location: what is not local is judged as cloud (withheld, nothing
    searched or stored), where it used to resolve the value once more and refuse a missing one."""
    room = RoomFactory()
    MemoryFactory(content=FACT, language="de")
    for unresolved in (None, "", "mars"):
        found = forget_request_create(query="Vergiss den Müll", speaker=None, room=room, model_location=unresolved)
        assert (found.token, found.candidates, found.withheld_reason) == (None, [], FORGET_NEEDS_LOCAL)
    assert not ForgetRequest.objects.exists()
