"""The four live scenarios of the original system, in German, end to end through the internal API.

They go through the remember, recall, find_to_forget and forget endpoints and the conversation
endpoints. The LLM is the fake OpenAI-compatible server; extraction runs as the queued job would.
"""

import pytest

from memories.models import Memory, Tombstone
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation
from transcripts.tests.fake_llm import extraction_answer

pytestmark = pytest.mark.django_db

KEY = "Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur"
CODE = "Der Code für das Gartentor ist 4711"


@pytest.fixture
def household():
    return {"julian": PersonFactory(name="Julian", preferred_language="de"), "room": RoomFactory(name="Wohnzimmer")}


class Assistant:
    """Plays the assistant's part: opens conversations, logs turns, calls the tools, ends conversations."""

    def __init__(self, api, household, capture):
        self.api, self.speaker, self.room, self.capture = api, household["julian"], household["room"], capture

    def start(self) -> int:
        response = self.api.post(
            "/internal/v1/conversations",
            {"room_id": self.room.pk, "speaker_id": self.speaker.pk, "language": "de", "model_location": "local"},
        )
        assert response.status_code == 201, response.json()
        return response.json()["id"]

    def turn(self, conversation_id: int, role: str, text: str) -> None:
        response = self.api.post(
            f"/internal/v1/conversations/{conversation_id}/turns", {"turns": [{"role": role, "text": text}]}
        )
        assert response.status_code == 201, response.json()

    def tool(self, name: str, **payload) -> dict:
        payload = {"room_id": self.room.pk, "speaker_id": self.speaker.pk, **payload}
        if "conversation_id" not in payload and name in ("recall", "find_to_forget"):
            payload["model_location"] = "local"  # the assistant's session says where its model runs
        if name in ("forget",):
            payload.pop("room_id")
        path = "/internal/v1/recall" if name == "recall" else f"/internal/v1/memories/{name}"
        response = self.api.post(path, payload)
        assert response.status_code in (200, 201), (name, response.status_code, response.json())
        return response.json()

    def end(self, conversation_id: int) -> None:
        with self.capture(execute=True):
            response = self.api.post(f"/internal/v1/conversations/{conversation_id}/end")
        assert response.json()["extraction_status"] == "queued"


@pytest.fixture
def assistant(api, household, django_capture_on_commit_callbacks):
    return Assistant(api, household, django_capture_on_commit_callbacks)


def remember_the_key(assistant) -> tuple[int, dict]:
    conversation = assistant.start()
    assistant.turn(conversation, "user", f"Bitte merk dir: {KEY[0].lower()}{KEY[1:]}")
    result = assistant.tool("remember", content=KEY, language="de", conversation_id=conversation)
    assistant.turn(conversation, "assistant", "Ich habe es mir gemerkt.")
    return conversation, result


def test_1_remember_the_spare_key_stored_as_fact_shared_confirmed(meaning, assistant, fake_llm, run_jobs):
    conversation, result = remember_the_key(assistant)
    assert result["outcome"] == "created"
    memory = Memory.objects.get(pk=result["id"])
    assert (memory.content, memory.kind, memory.scope, memory.provenance, memory.language) == (
        KEY,
        "fact",
        "shared",
        "confirmed",
        "de",
    )
    # The conversation ends; extraction finds the same fact again and merges it (confirmed stays).
    fake_llm.default = extraction_answer(facts=[KEY])
    assistant.end(conversation)
    run_jobs()
    assert Conversation.objects.get(pk=conversation).extraction_stats["merged"] == 1
    memory.refresh_from_db()
    assert (memory.provenance, Memory.objects.filter(content=KEY).count()) == ("confirmed", 1)


def test_2_a_new_conversation_asks_where_the_key_is_and_recall_returns_it(meaning, assistant, fake_llm):
    _, remembered = remember_the_key(assistant)
    conversation = assistant.start()
    question = "Wo ist der Ersatzschlüssel für den Keller?"
    assistant.turn(conversation, "user", question)
    answer = assistant.tool("recall", query=question, conversation_id=conversation)
    assert answer["withheld"] is False
    found = {m["id"]: m for m in answer["memories"]}
    assert remembered["id"] in found
    assert (found[remembered["id"]]["content"], found[remembered["id"]]["label"]) == (KEY, "confirmed")
    assert KEY in answer["prompt"]
    assert [t["text"] for t in answer["working_memory"]] == [question]


def test_3_forget_where_the_key_is_asks_for_confirmation_and_deletes_after_ja(meaning, assistant, fake_llm):
    _, remembered = remember_the_key(assistant)
    conversation = assistant.start()
    assistant.turn(conversation, "user", "Bitte vergiss, wo der Ersatzschlüssel ist.")
    found = assistant.tool("find_to_forget", query="wo der Ersatzschlüssel ist")
    assert remembered["id"] in [c["id"] for c in found["candidates"]]
    assert found["token"]
    # The assistant asks back; nothing is deleted before the answer.
    assistant.turn(conversation, "assistant", "Soll ich wirklich vergessen, wo der Ersatzschlüssel ist?")
    assert Memory.objects.filter(pk=remembered["id"]).exists()
    assistant.turn(conversation, "user", "ja")
    forgotten = assistant.tool("forget", token=found["token"], confirm=True, memory_ids=[remembered["id"]])
    assert forgotten["forgotten"] == 1
    assert not Memory.objects.filter(pk=remembered["id"]).exists()
    assert Tombstone.objects.filter(memory_id=remembered["id"]).exists()
    answer = assistant.tool("recall", query="Wo ist der Ersatzschlüssel für den Keller?")
    assert all("blauen Dose" not in m["content"] for m in answer["memories"])


def test_4_a_forgotten_code_does_not_come_back_through_extraction(meaning, assistant, fake_llm, run_jobs):
    first = assistant.start()
    assistant.turn(first, "user", "Merk dir: der Code für das Gartentor ist 4711")
    remembered = assistant.tool("remember", content=CODE, language="de", conversation_id=first)
    assistant.turn(first, "assistant", "Gemerkt.")

    second = assistant.start()
    assistant.turn(second, "user", "Vergiss den Code")
    found = assistant.tool("find_to_forget", query="den Code")
    assert remembered["id"] in [c["id"] for c in found["candidates"]]
    assistant.turn(second, "assistant", "Soll ich den Code für das Gartentor vergessen?")
    assistant.turn(second, "user", "Ja")
    forgotten = assistant.tool("forget", token=found["token"], confirm=True, memory_ids=[remembered["id"]])
    assert (forgotten["forgotten"], forgotten["memory_ids"]) == (1, [remembered["id"]])

    # Both conversations end; the LLM extracts the code again and summarises with it.
    fake_llm.default = extraction_answer(
        facts=[CODE], summary="Julian hat den Code 4711 für das Gartentor genannt und ihn dann vergessen lassen."
    )
    assistant.end(first)
    assistant.end(second)
    assert [result for *_, result in run_jobs()] == ["done", "done"]
    # the first conversation said the code (its turn now holds the marker): the item counts as forgotten and the
    # summary is left out; the second never said it: the item and the summary are not grounded in it
    expected = {first: (1, 0, "left_out", 0), second: (0, 1, "ungrounded", 0)}
    for conversation_id, outcome in expected.items():
        stats = Conversation.objects.get(pk=conversation_id).extraction_stats
        assert (stats["skipped_forgotten"], stats["ungrounded"], stats["summary"], stats["created"]) == outcome
    assert len(fake_llm.requests) == 2
    assert not Memory.objects.filter(content__contains="4711").exists()
    answer = assistant.tool("recall", query="Wie ist der Code für das Gartentor?")
    assert all("4711" not in m["content"] for m in answer["memories"])
    assert "4711" not in answer["prompt"]
