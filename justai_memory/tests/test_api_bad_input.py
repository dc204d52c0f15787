"""Bad input to the internal API: NUL, lone surrogates, deep JSON, impossible or absurd times, big bodies.

Each gets a 4xx JSON answer naming the field, with no text of the input in it, and writes nothing.
"""

import json
import tempfile
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.urls import resolve

from justai_core.errors import ApplicationError
from justai_memory.api.parser import json_depth
from memories.limits import MAX_BODY_BYTES, MAX_JSON_DEPTH
from memories.models import AuditEvent, ForgetRequest, Memory, Tombstone
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Event, Sighting, Turn
from transcripts.services.ingest import event_record, sighting_record
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db

SECRET = "Zebra-Passwort 98765"
NUL = f"{SECRET}\u0000"
SURROGATE = f"{SECRET}\ud800"


def _rows():
    return tuple(
        model.objects.count() for model in (Memory, AuditEvent, Tombstone, ForgetRequest, Turn, Event, Sighting)
    )


@pytest.fixture
def home():
    room, anna = RoomFactory(), PersonFactory()
    conversation = ConversationFactory(room=room, speaker=anna)
    MemoryFactory(content="Der Code für das Gartentor ist 4711.", language="de")
    memories_forget(memory_ids=[MemoryFactory(content="Der Kellerschlüssel ist in der Dose.").pk], actor="test")
    return {"room": room.pk, "anna": anna.pk, "conversation": conversation.pk}


# (endpoint, body with BAD where the bad text goes, the field the answer names)
TEXT_FIELDS = [
    ("/internal/v1/recall", {"query": "BAD", "room_id": "ROOM"}, "query"),
    ("/internal/v1/memories/remember", {"content": "BAD", "room_id": "ROOM"}, "content"),
    ("/internal/v1/memories/remember", {"content": "ok", "room_id": "ROOM", "language": "BAD"}, "language"),
    ("/internal/v1/memories/observe", {"content": "BAD", "language": "de"}, "content"),
    ("/internal/v1/memories/find_to_forget", {"query": "BAD", "room_id": "ROOM"}, "query"),
    ("/internal/v1/memories/forget", {"token": "BAD", "confirm": True}, "token"),
    ("/internal/v1/events", {"kind": "BAD"}, "kind"),
    ("/internal/v1/events", {"kind": "door.opened", "payload": {"note": "BAD"}}, "payload"),
    ("/internal/v1/events", {"kind": "door.opened", "payload": {"deep": [{"x": ["BAD"]}]}}, "payload"),
    ("/internal/v1/events", {"kind": "door.opened", "payload": {"BAD": 1}}, "payload"),
    (
        "/internal/v1/conversations/CONVERSATION/turns",
        {"turns": [{"role": "user", "text": "ok"}, {"role": "user", "text": "ok"}, {"role": "user", "text": "BAD"}]},
        "turns[2].text",
    ),
]


def _fill(value, home, bad):
    if isinstance(value, dict):
        return {(bad if k == "BAD" else k): _fill(v, home, bad) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, home, bad) for v in value]
    return {"BAD": bad, "ROOM": home["room"]}.get(value, value) if isinstance(value, str) else value


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize(("path", "body", "field"), TEXT_FIELDS, ids=[f"{p} {f}" for p, _, f in TEXT_FIELDS])
def test_nul_and_lone_surrogates_are_refused_naming_the_field(api, home, bad, path, body, field):
    before = _rows()
    response = api.post(path.replace("CONVERSATION", str(home["conversation"])), _fill(body, home, bad))
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field and response.json()["error"]
    assert SECRET not in response.content.decode()
    assert _rows() == before


def test_json_nested_20000_deep_is_a_400_on_the_body(client, api_token):
    before = _rows()
    bodies = [b"[" * 20_000 + b"]" * 20_000, b'{"kind": "x", "payload": {"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}}"]
    for body in bodies:
        assert len(body) <= MAX_BODY_BYTES
        response = client.post(
            "/internal/v1/events", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}"
        )
        assert response.status_code == 400, response.content
        assert response.json()["field"] == "body" and "deeper" in response.json()["error"]
    assert _rows() == before


def test_nesting_up_to_the_limit_is_fine_and_one_more_is_not(api):
    def nested(levels):  # the body object itself is one level
        payload = 1
        for _ in range(levels - 1):
            payload = {"a": payload}
        return {"kind": "door.opened", "payload": payload}

    assert api.post("/internal/v1/events", nested(MAX_JSON_DEPTH)).status_code == 201
    too_deep = api.post("/internal/v1/events", nested(MAX_JSON_DEPTH + 1))
    assert too_deep.status_code == 400 and too_deep.json()["field"] == "body"


def test_json_depth_ignores_brackets_inside_strings():
    assert json_depth(b'{"a": "[[[{{{", "b": [1, {"c": "\\"]]"}]}') == 3
    assert json_depth(b"[]") == 1 and json_depth(b"1") == 0


@pytest.mark.parametrize(
    "value",
    [
        "2025-02-30T10:00:00",
        "2025-03-01T25:00",
        "2025-03-01T10:00:00+99:00",
        "9999-12-31T23:59:59-14:00",
        "0001-01-01T00:00:00+14:00",
        "1969-12-31T23:59:59+00:00",
        "gestern",
        "",
        17,
    ],
)
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/internal/v1/sightings", {"person_id": "PERSON", "room_id": "ROOM"}, "seen_at"),
        ("/internal/v1/events", {"kind": "door.opened", "room_id": "ROOM"}, "occurred_at"),
    ],
)
def test_impossible_or_absurd_times_are_refused_naming_the_field(api, path, body, field, value):
    values = {"PERSON": PersonFactory().pk, "ROOM": RoomFactory().pk}
    response = api.post(path, {**{k: values.get(v, v) for k, v in body.items()}, field: value})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert not Sighting.objects.exists() and not Event.objects.exists()


def test_a_time_a_few_hours_ahead_or_without_zone_is_accepted(api, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    hall, anna = RoomFactory(), PersonFactory()
    response = api.post(
        "/internal/v1/sightings", {"person_id": anna.pk, "room_id": hall.pk, "seen_at": "2025-07-01T10:00"}
    )
    assert response.status_code == 201
    assert Sighting.objects.get().seen_at.isoformat() == "2025-07-01T08:00:00+00:00"


@pytest.mark.parametrize("size", [MAX_BODY_BYTES + 1, 3 * 1024 * 1024])
def test_a_body_over_the_limit_is_a_json_413_whatever_its_size(client, api_token, size):
    body = json.dumps({"query": "x", "room_id": 1, "padding": "y" * size}).encode()
    response = client.post(
        "/internal/v1/recall", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}"
    )
    assert response.status_code == 413 and response["Content-Type"].startswith("application/json")
    assert response.json()["field"] == "body"


def test_a_declared_length_over_the_limit_is_a_413_also_where_no_body_is_read(client, api_token):
    conversation = ConversationFactory()
    response = client.post(
        f"/internal/v1/conversations/{conversation.pk}/end",
        data=b" " * (MAX_BODY_BYTES + 1),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_token}",
    )
    assert response.status_code == 413 and response.json()["field"] == "body"
    conversation.refresh_from_db()
    assert conversation.ended_at is None


@pytest.mark.parametrize("size", [MAX_BODY_BYTES + 1, 3 * 1024 * 1024])
def test_a_chunked_body_without_content_length_over_the_limit_is_a_json_413(api_token, size):
    """On ASGI a chunked body arrives without Content-Length, in a seekable spooled file."""
    body = json.dumps({"content": "y" * size, "room_id": 1}).encode()
    stream = tempfile.SpooledTemporaryFile()
    stream.write(body)
    stream.seek(0)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/internal/v1/memories/remember",
        "query_string": b"",
        "headers": [
            (b"content-type", b"application/json"),
            (b"transfer-encoding", b"chunked"),
            (b"authorization", f"Bearer {api_token}".encode()),
        ],
    }
    request = ASGIRequest(scope, stream)
    assert "CONTENT_LENGTH" not in request.META
    match = resolve(request.path)
    response = match.func(request, *match.args, **match.kwargs)
    assert response.status_code == 413 and json.loads(response.content)["field"] == "body"
    assert not Memory.objects.exists()


def test_a_form_encoded_or_empty_body_names_the_body(api, client, api_token, home):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_token}"}
    form = client.post("/internal/v1/recall", {"query": "x", "room_id": home["room"]}, **auth)
    empty = client.post("/internal/v1/recall", data=b"", content_type="application/json", **auth)
    nan = client.post(
        "/internal/v1/events", data=b'{"kind": "x", "payload": {"v": NaN}}', content_type="application/json", **auth
    )
    huge = client.post(
        "/internal/v1/events", data=b'{"kind": "x", "payload": {"v": 1e999}}', content_type="application/json", **auth
    )
    for response in (form, empty, nan, huge):
        assert response.status_code == 400 and response.json()["field"] == "body", response.content
    assert not Event.objects.exists()


def test_the_services_refuse_absurd_times_too():
    anna, hall = PersonFactory(), RoomFactory()
    far = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14)))
    with pytest.raises(ApplicationError) as refused:
        sighting_record(person=anna, room=hall, seen_at=far)
    assert refused.value.field == "seen_at"
    with pytest.raises(ApplicationError) as refused:
        event_record(kind="door.opened", occurred_at=datetime(1969, 12, 31, tzinfo=UTC))
    assert refused.value.field == "occurred_at"
    assert not Sighting.objects.exists() and not Event.objects.exists()
