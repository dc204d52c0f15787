"""The internal API for recall, remember and the tool schemas: auth, shapes, and bad input that writes nothing."""

import re

import pytest
from django.urls import resolve

from memories.models import AuditEvent, Memory, MemoryAccess, Tombstone
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db

RECALL = "/internal/v1/recall"
REMEMBER = "/internal/v1/memories/remember"
TOOLS = "/internal/v1/tools"


@pytest.mark.meaning_blind("refused before anything is embedded")
def test_no_token_configured_means_closed(client, settings):
    settings.INTERNAL_API_TOKENS = []
    response = client.get(TOOLS, HTTP_AUTHORIZATION="Bearer anything")
    assert response.status_code == 403


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic test-token", "Bearer "])
def test_a_missing_or_wrong_token_is_refused_and_writes_nothing(client, api_token, header):
    room = RoomFactory()
    extra = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = client.post(
        REMEMBER, data={"content": "x", "room_id": room.pk}, content_type="application/json", **extra
    )
    assert response.status_code == 401 and response.json()["field"] == "Authorization"
    assert not Memory.objects.exists()


@pytest.mark.meaning_blind("the tools' schemas: nothing is embedded")
def test_tools_are_openai_function_schemas_with_a_route_each(api):
    body = api.get(TOOLS).json()
    names = [tool["function"]["name"] for tool in body["tools"]]
    assert names == ["memory_remember", "memory_find_to_forget", "memory_forget", "memory_source"]
    for tool in body["tools"]:
        function = tool["function"]
        assert tool["type"] == "function" and re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", function["name"])
        assert function["description"] and function["parameters"]["type"] == "object"
        assert set(function["parameters"]["required"]) <= set(function["parameters"]["properties"])
        route = body["routes"][function["name"]]
        assert route["tool"] == function["name"].replace("_", ".", 1) and route["method"] == "POST"
    assert resolve(body["routes"]["memory_remember"]["path"]).url_name == "internal-remember"
    assert body["session_fields"] == ["room_id", "speaker_id", "conversation_id", "model_location"]


def test_recall_answers_with_memories_prompt_and_working_memory(e5, api):
    room, anna = RoomFactory(), PersonFactory()
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    conversation = ConversationFactory(room=room, speaker=anna, language="de")
    TurnFactory(conversation=conversation, text="Wo ist der Kellerschlüssel?", speaker=anna)

    response = api.post(
        RECALL,
        {
            "query": "Where is the cellar key?",
            "room_id": room.pk,
            "speaker_id": anna.pk,
            "conversation_id": conversation.pk,
        },
    )

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"memories", "prompt", "withheld", "withheld_reason", "working_memory"}
    [recalled] = body["memories"]
    assert set(recalled) == {
        *("id", "content", "language", "kind", "label", "provenance", "scope", "date", "score", "found_by"),
    }
    assert (recalled["id"], recalled["label"], recalled["scope"]) == (memory.pk, "confirmed", "shared")
    # Why it came back: the paths that found it, with its rank and score in each; none in the prompt.
    assert recalled["found_by"]["vector"]["rank"] == 1
    assert recalled["found_by"]["vector"]["score"] == pytest.approx(recalled["score"], abs=1e-3)
    assert "rank" not in body["prompt"]
    assert "The cellar key is in the blue tin" in body["prompt"]
    assert (body["withheld"], body["withheld_reason"]) == (False, None)
    [turn] = body["working_memory"]
    assert (turn["role"], turn["speaker_id"], turn["text"]) == ("user", anna.pk, "Wo ist der Kellerschlüssel?")


def test_recall_for_a_cloud_conversation_is_withheld(e5, api):
    room = RoomFactory()
    MemoryFactory(content="The cellar key is in the blue tin")
    cloud = ConversationFactory(room=room, model_location="cloud")
    body = api.post(RECALL, {"query": "cellar key", "room_id": room.pk, "conversation_id": cloud.pk}).json()
    assert body["withheld"] is True and body["memories"] == [] and body["withheld_reason"]
    assert "withheld" in body["prompt"]


def test_remember_creates_then_merges_and_reports_lifted_blocks(meaning, api):
    room, anna = RoomFactory(), PersonFactory(preferred_language="it")
    payload = {"content": "Il codice del cancello è 4711", "room_id": room.pk, "speaker_id": anna.pk}

    first = api.post(REMEMBER, payload)
    assert first.status_code == 201 and first.json()["outcome"] == "created"
    memory = Memory.objects.get(pk=first.json()["id"])
    assert (memory.provenance, memory.source, memory.scope, memory.language) == ("confirmed", "tool", "shared", "it")

    again = api.post(REMEMBER, payload)
    assert again.status_code == 201 and again.json() == {"id": memory.pk, "outcome": "merged", "lifted_blocks": 0}

    memories_forget(memory_ids=[memory.pk], actor="test")
    lifted = api.post(REMEMBER, payload)
    assert lifted.status_code == 201 and lifted.json()["lifted_blocks"] == 1 and not Tombstone.objects.exists()


@pytest.mark.meaning_blind("the stored language, settled before anything is embedded")
def test_remember_stores_the_language_the_content_is_written_in_not_the_speakers(api):
    room, giulia = RoomFactory(), PersonFactory(preferred_language="it")
    body = api.post(
        REMEMBER, {"content": "Der Code für das Gartentor ist 4711", "room_id": room.pk, "speaker_id": giulia.pk}
    ).json()
    assert Memory.objects.get(pk=body["id"]).language == "de"


@pytest.mark.meaning_blind("the stored language, settled before anything is embedded")
@pytest.mark.parametrize(
    ("conversation_language", "expected"), [("es", "es"), (None, "it")], ids=["conversation", "speaker"]
)
def test_remember_too_short_to_tell_falls_back_to_the_conversation_then_the_speaker(
    api, conversation_language, expected
):
    room, giulia = RoomFactory(), PersonFactory(preferred_language="it")
    payload = {"content": "Tor 4711", "room_id": room.pk, "speaker_id": giulia.pk}
    if conversation_language:
        payload["conversation_id"] = ConversationFactory(room=room, language=conversation_language).pk
    body = api.post(REMEMBER, payload).json()
    assert Memory.objects.get(pk=body["id"]).language == expected


@pytest.mark.meaning_blind("the stored language, settled before anything is embedded")
def test_remember_takes_language_and_source_from_the_conversation(api):
    room, anna = RoomFactory(), PersonFactory()
    conversation = ConversationFactory(room=room, language="es")
    body = api.post(
        REMEMBER,
        {
            "content": "Me gusta el té verde",
            "room_id": room.pk,
            "speaker_id": anna.pk,
            "conversation_id": conversation.pk,
            "scope": "private",
            "kind": "preference",
            "about_id": anna.pk,
        },
    ).json()
    memory = Memory.objects.get(pk=body["id"])
    assert (memory.language, memory.source_ref, memory.scope, memory.owner, memory.kind, memory.about) == (
        "es",
        f"conversation:{conversation.pk}",
        "private",
        anna,
        "preference",
        anna,
    )


def _snapshot():
    return (
        Memory.objects.count(),
        AuditEvent.objects.count(),
        Tombstone.objects.count(),
        sorted(MemoryAccess.objects.values_list("memory_id", "count")),
    )


@pytest.fixture
def world():
    room, other_room, anna = RoomFactory(), RoomFactory(), PersonFactory()
    MemoryFactory(content="The gate code is 4711")
    memories_forget(memory_ids=[MemoryFactory(content="The cellar key is in the blue tin").pk], actor="test")
    return {"room": room.pk, "anna": anna.pk, "other_conversation": ConversationFactory(room=other_room).pk}


BAD_REMEMBER = [
    ("missing content", {"content": None}, "content", 400),
    ("empty content", {"content": "   "}, "content", 400),
    ("content not a string", {"content": 4711}, "content", 400),
    ("content too long", {"content": "x" * 4001}, "content", 400),
    ("missing room", {"room_id": None}, "room_id", 400),
    ("room id a string", {"room_id": "1"}, "room_id", 400),
    ("room id a bool", {"room_id": True}, "room_id", 400),
    ("unknown room", {"room_id": 999999}, "room_id", 404),
    ("unknown speaker", {"speaker_id": 999999}, "speaker_id", 404),
    ("speaker id a float", {"speaker_id": 1.5}, "speaker_id", 400),
    ("unknown conversation", {"conversation_id": 999999}, "conversation_id", 404),
    ("conversation of another room", {"conversation_id": "other"}, "conversation_id", 400),
    ("unknown about", {"about_id": 999999}, "about_id", 404),
    ("private from an unknown speaker", {"scope": "private", "speaker_id": None}, "scope", 400),
    ("system scope", {"scope": "system"}, "scope", 400),
    ("unknown scope", {"scope": "public"}, "scope", 400),
    ("unknown kind", {"kind": "rumour"}, "kind", 400),
    ("language not a code", {"language": "Deutsch"}, "language", 400),
    ("language not a string", {"language": 7}, "language", 400),
]


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(("case", "change", "field", "status"), BAD_REMEMBER, ids=[c[0] for c in BAD_REMEMBER])
def test_bad_remember_input_names_the_field_and_writes_nothing(api, world, case, change, field, status):
    payload = {"content": "The cellar key is in the blue tin", "room_id": world["room"], "speaker_id": world["anna"]}
    payload.update({k: world["other_conversation"] if v == "other" else v for k, v in change.items()})
    payload = {k: v for k, v in payload.items() if v is not None}
    before = _snapshot()
    response = api.post(REMEMBER, payload)
    assert response.status_code == status, response.json()
    assert response.json()["field"] == field and response.json()["error"]
    assert _snapshot() == before


@pytest.mark.meaning_blind("refused before anything is embedded")
def test_the_json_api_says_which_of_its_fields_a_refused_remember_needs(api, world):
    # The service's message names no transport's field; the JSON API adds its own (MCP adds its header).
    payload = {"content": "My PIN is 1234", "room_id": world["room"], "scope": "private"}
    response = api.post(REMEMBER, payload)
    assert response.status_code == 400
    assert response.json() == {
        "error": "A private memory needs its owner, a known speaker (speaker_id).",
        "field": "scope",
    }


@pytest.mark.meaning_blind("refused before anything is embedded")
def test_an_unknown_scope_is_refused_with_the_scopes_values(api, world):
    payload = {"content": "My PIN is 1234", "room_id": world["room"], "scope": "public"}
    response = api.post(REMEMBER, payload)
    assert response.json() == {"error": "'scope' must be one of: shared, room, private.", "field": "scope"}


BAD_RECALL = [
    ("missing query", {"query": None}, "query", 400),
    ("empty query", {"query": ""}, "query", 400),
    ("query not a string", {"query": ["gate"]}, "query", 400),
    ("query too long", {"query": "x" * 4001}, "query", 400),
    ("missing room", {"room_id": None}, "room_id", 400),
    ("unknown room", {"room_id": 999999}, "room_id", 404),
    ("unknown speaker", {"speaker_id": 999999}, "speaker_id", 404),
    ("unknown conversation", {"conversation_id": 999999}, "conversation_id", 404),
    ("conversation of another room", {"conversation_id": "other"}, "conversation_id", 400),
    ("limit zero", {"limit": 0}, "limit", 400),
    ("limit too high", {"limit": 51}, "limit", 400),
    ("limit a string", {"limit": "5"}, "limit", 400),
    ("no model location without a conversation", {"model_location": None}, "model_location", 400),
    ("model location not local or cloud", {"model_location": "moon"}, "model_location", 400),
    ("model location not a string", {"model_location": 1}, "model_location", 400),
]


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(("case", "change", "field", "status"), BAD_RECALL, ids=[c[0] for c in BAD_RECALL])
def test_bad_recall_input_names_the_field_and_writes_nothing(api, world, case, change, field, status):
    payload = {"query": "What is the gate code?", "room_id": world["room"], "model_location": "local"}
    payload.update({k: world["other_conversation"] if v == "other" else v for k, v in change.items()})
    payload = {k: v for k, v in payload.items() if v is not None}
    before = _snapshot()
    response = api.post(RECALL, payload)
    assert response.status_code == status, response.json()
    assert response.json()["field"] == field and response.json()["error"]
    assert _snapshot() == before


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize("path", [RECALL, REMEMBER])
@pytest.mark.parametrize(("body", "message"), [(b"{not json", "not valid JSON"), (b"[1, 2]", "JSON object")])
def test_a_body_that_is_not_a_json_object_names_the_body(api, client, api_token, world, path, body, message):
    before = _snapshot()
    response = client.post(path, data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}")
    assert response.status_code == 400 and response.json()["field"] == "body" and message in response.json()["error"]
    assert _snapshot() == before


@pytest.mark.meaning_blind("refused before anything is embedded")
def test_wrong_methods_are_refused(api):
    assert api.get(RECALL).status_code == 405
    assert api.post(TOOLS, {}).status_code == 405
