"""One caller (justai_memory/api/caller.py): the JSON API, the MCP server and the admin's recall preview resolve
room, speaker, conversation and model location by one resolver, with the same rule and the same message, and
services take the resolved value whole (memories/caller.py).

The MCP side runs in this process: the tool functions with a request context as the SDK hands it over
(the grant McpAuth found, the client's headers); test_mcp.py drives the same through a served /mcp.
"""

import inspect
from types import SimpleNamespace

import pytest
from django.urls import reverse
from mcp.server.mcpserver.exceptions import ToolError

from connections.models import Connection
from justai_core.errors import ApplicationError, with_source
from justai_core.locations import CLOUD, LOCAL
from justai_memory.api.caller import caller_of_connection, caller_of_ids, caller_resolve
from justai_memory.mcp import server as mcp_server
from justai_memory.mcp.auth import ALL_SCOPES, CALLER_KEY, Grant
from memories.caller import Caller
from memories.models import AuditEvent, ForgetRequest, Memory, MemoryAccess, RecallDay
from memories.selectors.person import procedures_for
from memories.selectors.privacy import MODEL_LOCATION_INVALID, MODEL_LOCATION_REQUIRED
from memories.selectors.recall import CONVERSATION_OTHER_ROOM
from memories.services.forget import forget_request_create
from memories.services.recall import memory_recall
from memories.services.remember import memory_remember
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation
from transcripts.services.conversations import conversation_start
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


def test_a_caller_value_holds_only_a_resolved_location():
    """Services take the caller whole and never resolve its location again: a value the rule did not resolve
    (missing, empty, unknown) cannot be built, so no service can be handed one; the 400 names model_location."""
    room = RoomFactory()
    for unresolved, message in (
        (None, MODEL_LOCATION_REQUIRED),
        ("", MODEL_LOCATION_INVALID),
        ("mars", MODEL_LOCATION_INVALID),
    ):
        with pytest.raises(ApplicationError) as refused:
            Caller(room=room, speaker=None, model_location=unresolved)
        assert (refused.value.message, refused.value.field, refused.value.status) == (message, "model_location", 400)


@pytest.mark.parametrize(
    "service",
    [memory_recall, forget_request_create, memory_remember, procedures_for, conversation_start],
    ids=lambda f: f.__name__,
)
def test_a_service_takes_the_caller_value_never_its_fields(service):
    # (conversation_start's own ``language`` is the new conversation's, not the caller's.)
    parameters = inspect.signature(service).parameters
    assert "caller" in parameters
    assert not {"room", "speaker", "model_location"} & set(parameters)


# (speaker, conversation's location: None for no conversation, what the caller says)
SAME = [
    (False, None, "local"),
    (True, None, "cloud"),
    (True, LOCAL, None),
    (False, LOCAL, "cloud"),
    (True, CLOUD, "local"),
]


@pytest.mark.parametrize(("with_speaker", "stored", "said"), SAME)
def test_ids_and_loaded_objects_resolve_to_the_same_caller(with_speaker, stored, said):
    """One resolver: the API's ids (looked up) and the admin's loaded objects give the same value, conversation,
    language and location included."""
    room = RoomFactory()
    anna = PersonFactory() if with_speaker else None
    conversation = ConversationFactory(room=room, model_location=stored, language="it") if stored else None
    by_ids = caller_of_ids(
        room_id=room.pk,
        speaker_id=anna.pk if anna else None,
        conversation_id=conversation.pk if conversation else None,
        model_location=said,
    )
    by_objects = caller_resolve(room=room, speaker=anna, conversation=conversation, model_location=said)
    assert by_ids == by_objects
    assert by_ids.language == ("it" if conversation else None)
    assert by_ids.model_location == (CLOUD if CLOUD in (stored, said) else LOCAL)


def test_a_connection_resolves_as_its_loaded_objects_do():
    kitchen, anna = RoomFactory(), PersonFactory()
    for stored in (LOCAL, CLOUD, ""):
        connection = Connection(room=kitchen, speaker=anna, model_location=stored)
        assert caller_of_connection(connection) == caller_resolve(room=kitchen, speaker=anna, connection=connection)
        assert caller_of_connection(connection).model_location == (LOCAL if stored == LOCAL else CLOUD)


def _written():
    return (
        Memory.objects.count(),
        sorted(MemoryAccess.objects.values_list("memory_id", "count")),
        RecallDay.objects.count(),
        ForgetRequest.objects.count(),
        Conversation.objects.count(),
        AuditEvent.objects.count(),
    )


# Every endpoint that resolves a caller: (method, path, body or query, fields it takes besides room and speaker)
SURFACES = [
    ("post", "/internal/v1/recall", {"query": QUESTION, "model_location": "local"}, {"conversation_id"}),
    (
        "post",
        "/internal/v1/memories/find_to_forget",
        {"query": "Vergiss den Müll", "model_location": "local"},
        {"conversation_id"},
    ),
    ("post", "/internal/v1/memories/source", {"query": QUESTION, "model_location": "local"}, {"conversation_id"}),
    ("post", "/internal/v1/memories/remember", {"content": "Der Keller ist nass."}, {"conversation_id"}),
    ("post", "/internal/v1/conversations", {"language": "de", "model_location": "local"}, set()),
    ("get", "/internal/v1/memories/{memory}", {"model_location": "local"}, {"conversation_id"}),
    ("get", "/internal/v1/memories", {"kind": "procedure", "model_location": "local"}, set()),
]


@pytest.mark.parametrize(("method", "path", "body", "takes"), SURFACES, ids=[s[1] for s in SURFACES])
def test_a_bad_caller_id_is_a_4xx_naming_its_field_and_nothing_is_written(api, method, path, body, takes):
    room, other_room, anna = RoomFactory(), RoomFactory(), PersonFactory()
    memory = MemoryFactory(content=FACT, language="de")
    path = path.format(memory=memory.pk)
    bad = [({"room_id": 999999}, "room_id", 404), ({"speaker_id": 999999}, "speaker_id", 404)]
    if "conversation_id" in takes:
        other = ConversationFactory(room=other_room, model_location=LOCAL).pk
        bad += [
            ({"conversation_id": 999999}, "conversation_id", 404),
            ({"conversation_id": other}, "conversation_id", 400),
        ]
    before = _written()
    for change, field, status in bad:
        fields = {"room_id": room.pk, "speaker_id": anna.pk, **body, **change}
        answer = api.post(path, fields) if method == "post" else api.get(path, fields)
        assert (answer.status_code, answer.json()["field"]) == (status, field), change
        assert "Dienstag" not in answer.content.decode()
        assert _written() == before, change


def test_the_admin_preview_resolves_by_the_same_rule_and_names_its_own_field(admin_client):
    kitchen, other_room = RoomFactory(), RoomFactory()
    MemoryFactory(content=FACT, language="de")
    preview = reverse("admin:memories_memory_recall_preview")
    asked = {"query": QUESTION, "room": kitchen.pk, "speaker": "", "limit": 10, "model_location": "local"}
    foreign = ConversationFactory(room=other_room, model_location=LOCAL)
    response = admin_client.get(preview, {**asked, "conversation": foreign.pk})
    assert response.context["result"] is None
    assert response.context["form"].errors == {"conversation": [CONVERSATION_OTHER_ROOM]}
    # Said local, the conversation's cloud: cloud, as the API resolves it (memories withheld).
    cloudy = ConversationFactory(room=kitchen, model_location=CLOUD)
    response = admin_client.get(preview, {**asked, "conversation": cloudy.pk})
    assert response.context["result"].withheld and "Dienstag" not in response.content.decode()
    assert _written()[1:3] == ([], 0)
