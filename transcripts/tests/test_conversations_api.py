"""Conversation endpoints: start, turns, end (queues extraction on commit), working memory."""

import pytest
from django.db import IntegrityError, transaction

from justai_core.errors import ApplicationError
from memories.caller import Caller
from memories.tests.helpers import queued_tasks
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, Turn
from transcripts.selectors import EXTRACT_JOB
from transcripts.services.conversations import conversation_start
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db


def start(api, **fields):
    room = fields.pop("room", None) or RoomFactory()
    fields.setdefault("model_location", "local")
    response = api.post("/internal/v1/conversations", {"room_id": room.pk, "language": "de", **fields})
    assert response.status_code == 201, response.json()
    return Conversation.objects.get(pk=response.json()["id"])


def test_start_with_a_known_or_an_unknown_speaker(api):
    anna = PersonFactory(name="Anna")
    known = start(api, speaker_id=anna.pk, model_location="cloud")
    unknown = start(api)
    assert (known.speaker, known.model_location, known.extraction_status) == (anna, "cloud", "open")
    assert (unknown.speaker, unknown.model_location, unknown.language) == (None, "local", "de")


def test_a_conversation_must_say_where_its_model_runs(api):
    """No default that fails open: without model_location the start is a 400 naming it and nothing is stored;
    the API schema requires it, and the model has no default either."""
    room = RoomFactory()
    for missing in ({}, {"model_location": None}, {"model_location": ""}, {"model_location": "LOCAL"}):
        response = api.post("/internal/v1/conversations", {"room_id": room.pk, "language": "de", **missing})
        assert (response.status_code, response.json()["field"]) == (400, "model_location"), missing
        assert "model_location" in response.json()["error"]
    assert not Conversation.objects.exists()
    schema = api.get("/internal/v1/openapi.json").json()["components"]["schemas"]["ConversationIn"]
    assert "model_location" in schema["required"] and "default" not in schema["properties"]["model_location"]
    with pytest.raises(ApplicationError) as refused:  # the service takes a caller, which holds a location said
        conversation_start(caller=Caller(room=room, speaker=None, model_location=None), language="de")
    assert refused.value.field == "model_location"
    with pytest.raises(IntegrityError), transaction.atomic():
        Conversation.objects.create(room=room, language="de")  # no default: the check constraint refuses ""
    assert not Conversation.objects.exists()


@pytest.mark.parametrize(
    ("fields", "status", "field"),
    [
        ({"room_id": 999999, "language": "de", "model_location": "local"}, 404, "room_id"),
        ({"language": "de", "model_location": "local"}, 400, "room_id"),
        ({"room_id": "kitchen", "language": "de", "model_location": "local"}, 400, "room_id"),
        ({"room_id": "ROOM", "language": "Deutsch", "model_location": "local"}, 400, "language"),
        ({"room_id": "ROOM", "language": "de", "model_location": "moon"}, 400, "model_location"),
        ({"room_id": "ROOM", "language": "de", "speaker_id": 999999, "model_location": "local"}, 404, "speaker_id"),
    ],
)
def test_start_rejects_bad_input_naming_the_field(api, fields, status, field):
    room = RoomFactory()
    payload = {k: (room.pk if v == "ROOM" else v) for k, v in fields.items()}
    response = api.post("/internal/v1/conversations", payload)
    assert (response.status_code, response.json()["field"]) == (status, field)
    assert not Conversation.objects.exists()


def test_turns_are_appended_and_a_user_turn_defaults_to_the_conversation_speaker(api):
    anna, ben = PersonFactory(), PersonFactory()
    conversation = start(api, speaker_id=anna.pk)
    response = api.post(
        f"/internal/v1/conversations/{conversation.pk}/turns",
        {
            "turns": [
                {"role": "user", "text": " Wo ist der Schlüssel? "},
                {"role": "assistant", "text": "In der blauen Dose."},
                {"role": "user", "text": "Danke!", "speaker_id": ben.pk},
            ]
        },
    )
    assert response.status_code == 201 and response.json() == {"added": 3}
    turns = list(conversation.turns.order_by("id").values_list("role", "speaker_id", "text"))
    assert turns == [
        ("user", anna.pk, "Wo ist der Schlüssel?"),
        ("assistant", None, "In der blauen Dose."),
        ("user", ben.pk, "Danke!"),
    ]


@pytest.mark.parametrize(
    ("turns", "field"),
    [
        (None, "turns"),
        ([], "turns"),
        (["hello"], "turns[0]"),
        ([{"role": "user", "text": "ok"}, {"role": "narrator", "text": "x"}], "turns[1].role"),
        ([{"role": "user", "text": "ok"}, {"role": "user", "text": "   "}], "turns[1].text"),
        ([{"role": "user", "text": "x" * 4001}], "turns[0].text"),
        ([{"role": "user", "text": "ok", "speaker_id": 999999}], "turns[0].speaker_id"),
    ],
)
def test_bad_turns_write_nothing_and_name_the_field(api, turns, field):
    conversation = start(api)
    response = api.post(f"/internal/v1/conversations/{conversation.pk}/turns", {"turns": turns})
    assert response.status_code in (400, 404) and response.json()["field"] == field
    assert not Turn.objects.exists()


def test_an_unknown_conversation_is_a_json_404(api):
    response = api.post("/internal/v1/conversations/424242/turns", {"turns": [{"role": "user", "text": "hi"}]})
    assert response.status_code == 404 and response.json()["field"] == "conversation_id"


def test_end_queues_one_extraction_job_with_the_id_only_after_commit(api, django_capture_on_commit_callbacks):
    conversation = start(api)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api.post(f"/internal/v1/conversations/{conversation.pk}/end")
    assert response.status_code == 200
    assert response.json() == {"id": conversation.pk, "extraction_status": "queued"}
    assert len(callbacks) == 1
    (task,) = queued_tasks()
    assert (task["func"], task["args"], task["kwargs"]) == (EXTRACT_JOB, (conversation.pk,), {})
    assert task["name"] == f"memory.extract:{conversation.pk}"

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        again = api.post(f"/internal/v1/conversations/{conversation.pk}/end")
    assert again.json()["extraction_status"] == "queued" and callbacks == []
    assert len(queued_tasks()) == 1


def test_no_turns_after_the_end(api):
    conversation = start(api)
    api.post(f"/internal/v1/conversations/{conversation.pk}/end")
    response = api.post(
        f"/internal/v1/conversations/{conversation.pk}/turns", {"turns": [{"role": "user", "text": "x"}]}
    )
    assert response.status_code == 409 and response.json()["field"] == "conversation"


def test_working_memory_is_the_last_30_turns_oldest_first(api):
    conversation = ConversationFactory()
    other = TurnFactory(text="another conversation")
    for i in range(35):
        TurnFactory(conversation=conversation, text=f"Nachricht {i}", role="user" if i % 2 else "assistant")
    response = api.get(f"/internal/v1/conversations/{conversation.pk}/working_memory")
    assert response.status_code == 200
    turns = response.json()["turns"]
    assert [t["text"] for t in turns] == [f"Nachricht {i}" for i in range(5, 35)]
    assert set(turns[0]) == {"role", "speaker_id", "text", "at"}
    assert other.text not in {t["text"] for t in turns}


def test_the_endpoints_need_the_token(client, api_token):
    conversation = ConversationFactory()
    assert client.get(f"/internal/v1/conversations/{conversation.pk}/working_memory").status_code == 401
    assert client.post("/internal/v1/conversations", {}, content_type="application/json").status_code == 401
