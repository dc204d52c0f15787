"""Bad input to the internal API: NUL, lone surrogates, deep JSON, impossible or absurd times, big bodies, huge numbers.

Each gets a 4xx JSON answer naming the field, with no text of the input in it, and writes nothing.
"""

import json
import re
import tempfile
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.core.handlers.asgi import ASGIRequest
from django.urls import resolve

from justai_core.errors import ApplicationError
from justai_memory.api.main import api as ninja_api
from justai_memory.api.parser import json_depth
from memories.limits import MAX_BODY_BYTES, MAX_ID, MAX_JSON_DEPTH
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


# (method, endpoint, body with BAD where the bad text goes, the field the answer names): every text field
# of every request body (test_the_text_table_covers_every_text_field_of_the_document keeps it complete).
TEXT_FIELDS = [
    ("post", "/internal/v1/recall", {"query": "BAD", "room_id": "ROOM"}, "query"),
    ("post", "/internal/v1/memories/remember", {"content": "BAD", "room_id": "ROOM"}, "content"),
    ("post", "/internal/v1/memories/remember", {"content": "ok", "room_id": "ROOM", "language": "BAD"}, "language"),
    ("post", "/internal/v1/memories/observe", {"content": "BAD", "language": "de"}, "content"),
    ("post", "/internal/v1/memories/observe", {"content": "ok", "language": "BAD"}, "language"),
    ("post", "/internal/v1/memories/find_to_forget", {"query": "BAD", "room_id": "ROOM"}, "query"),
    ("post", "/internal/v1/memories/source", {"query": "BAD", "room_id": "ROOM"}, "query"),
    ("post", "/internal/v1/memories/forget", {"token": "BAD", "confirm": True}, "token"),
    ("post", "/internal/v1/events", {"kind": "BAD"}, "kind"),
    ("post", "/internal/v1/events", {"kind": "door.opened", "payload": {"note": "BAD"}}, "payload"),
    ("post", "/internal/v1/events", {"kind": "door.opened", "payload": {"deep": [{"x": ["BAD"]}]}}, "payload"),
    ("post", "/internal/v1/events", {"kind": "door.opened", "payload": {"BAD": 1}}, "payload"),
    ("post", "/internal/v1/conversations", {"room_id": "ROOM", "language": "BAD"}, "language"),
    (
        "post",
        "/internal/v1/conversations/CONVERSATION/turns",
        {"turns": [{"role": "user", "text": "ok"}, {"role": "user", "text": "ok"}, {"role": "user", "text": "BAD"}]},
        "turns[2].text",
    ),
    ("post", "/internal/v1/people", {"name": "BAD"}, "name"),
    ("post", "/internal/v1/people", {"name": "Berta", "aliases": ["Bibi", "BAD"]}, "aliases[1]"),
    ("post", "/internal/v1/people", {"name": "Berta", "preferred_language": "BAD"}, "preferred_language"),
    ("patch", "/internal/v1/people/PERSON", {"name": "BAD"}, "name"),
    ("patch", "/internal/v1/people/PERSON", {"aliases": ["BAD"]}, "aliases[0]"),
    ("patch", "/internal/v1/people/PERSON", {"preferred_language": "BAD"}, "preferred_language"),
    ("delete", "/internal/v1/people/PERSON", {"token": "BAD", "confirm": True}, "token"),
    ("post", "/internal/v1/rooms", {"name": "BAD"}, "name"),
    ("patch", "/internal/v1/rooms/ROOM", {"name": "BAD"}, "name"),
]
PLACEHOLDERS = {"CONVERSATION": "conversation", "PERSON": "anna", "ROOM": "room"}


def _fill(value, home, bad):
    if isinstance(value, dict):
        return {(bad if k == "BAD" else k): _fill(v, home, bad) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, home, bad) for v in value]
    return {"BAD": bad, "ROOM": home["room"]}.get(value, value) if isinstance(value, str) else value


def _path(path, home):
    for placeholder, key in PLACEHOLDERS.items():
        path = path.replace(placeholder, str(home[key]))
    return path


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize(
    ("method", "path", "body", "field"), TEXT_FIELDS, ids=[f"{m} {p} {f}" for m, p, _, f in TEXT_FIELDS]
)
def test_nul_and_lone_surrogates_are_refused_naming_the_field(api, home, bad, method, path, body, field):
    before = _rows()
    response = getattr(api, method)(_path(path, home), _fill(body, home, bad))
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field and response.json()["error"]
    assert SECRET not in response.content.decode()
    assert _rows() == before


# Texts whose length as sent is within the limit but whose cost is not: marks a tokenizer reads one by one (the
# 4,000-mark recall took 40 s on e5-small), and a character NFKC turns into 18 (U+FDFA).
COSTLY = {
    "4000-marks": "a" + "\u0301" * 3999,
    "10-marks": "Schl" + "\u0301" * 10 + "ssel",  # NFKC composes one (l with acute): 9 in a row
    "nfkc-longer": "\ufdfa" * 300,
}
FREE_TEXTS = [row for row in TEXT_FIELDS if row[3] not in ("payload", "language", "preferred_language")]


@pytest.mark.parametrize("bad", COSTLY.values(), ids=COSTLY.keys())
@pytest.mark.parametrize(
    ("method", "path", "body", "field"), FREE_TEXTS, ids=[f"{m} {p} {f}" for m, p, _, f in FREE_TEXTS]
)
def test_texts_that_cost_more_than_their_length_are_refused_naming_the_field(api, home, bad, method, path, body, field):
    before = _rows()
    response = getattr(api, method)(_path(path, home), _fill(body, home, bad))
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field and response.json()["error"]
    assert _rows() == before


def test_a_text_of_more_tokens_than_the_bound_is_refused_and_one_of_4000_german_characters_is_not(api, home, settings):
    settings.MEMORY_EMBEDDER = "e5-small"  # the embedder that counts tokens (the test settings' hash one does not)
    chinese = "我们的钥匙在哪里" * 500  # 4,000 characters, ~1,500 tokens
    response = api.post("/internal/v1/recall", {"query": chinese, "room_id": home["room"]})
    assert response.status_code == 400 and response.json()["field"] == "query", response.content
    assert "tokens" in response.json()["error"]
    german = ("Wo ist der Schlüssel für das Gartentor? " * 100)[:4000]  # ~900 tokens
    response = api.post("/internal/v1/memories/remember", {"content": german, "room_id": home["room"]})
    assert response.json().get("field") != "content", response.content


@pytest.mark.parametrize("language", ["de", "it", "en", "es"])
def test_ordinary_text_of_as_many_characters_as_the_schema_allows_fits_the_token_bound(settings, language):
    """The densest of 40 texts of MAX_TEXT_CHARS characters cut from the project's own translations (de, it; the
    English source), Django's Spanish admin and XQuAD-R's Wikipedia paragraphs is accepted: one limit to meet."""
    from pydantic import TypeAdapter

    from bench.text_limits import sources, windows
    from justai_memory.api.common import text
    from memories.embedders import get_embedder
    from memories.limits import MAX_TEXT_CHARS

    settings.MEMORY_EMBEDDER = "e5-small"
    texts = [
        window
        for (code, _source), sentences in sources().items()
        if code == language
        for window in windows(sentences, chars=MAX_TEXT_CHARS, count=40)
    ]
    densest = max(texts, key=get_embedder().token_count)
    assert len(densest) == MAX_TEXT_CHARS
    assert TypeAdapter(text()).validate_python(densest) == densest.strip()


def _document():
    return ninja_api.get_openapi_schema(path_prefix="/internal/v1")


def _inputs(document):
    """Every input of every operation: ``(method, path, field, JSON schema)``, the field as the answer's ``field``
    would name it with ``[]`` for any index (``turns[].text``); references resolved."""
    components = document["components"]["schemas"]

    def resolve(schema):
        while "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    def walk(schema, field):
        schema = resolve(schema)
        variants = [resolve(v) for v in schema.get("anyOf", []) if resolve(v).get("type") != "null"]
        for variant in variants:
            yield from walk(variant, field)
        if schema.get("type") == "object" and "properties" in schema:
            for name, prop in schema["properties"].items():
                yield from walk(prop, f"{field}.{name}" if field else name)
        elif schema.get("type") == "array":
            yield from walk(schema["items"], f"{field}[]")
        elif not variants:
            yield field, schema

    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                for field, schema in walk(parameter["schema"], parameter["name"]):
                    yield method, path, field, schema
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                for field, schema in walk(body["schema"], ""):
                    yield method, path, field, schema


def test_every_number_a_caller_sends_is_bounded_in_the_document():
    """Ids, limits, offsets: each has a minimum and a maximum in the document (so in the validation), an
    integer at most PostgreSQL's bigint, which would otherwise refuse it with an error instead of an answer."""
    numbers = [(m, p, f, s) for m, p, f, s in _inputs(_document()) if s.get("type") in ("integer", "number")]
    assert len(numbers) > 30
    for method, path, field, schema in numbers:
        assert "minimum" in schema and "maximum" in schema, (method, path, field, schema)
        if schema["type"] == "integer":
            assert schema["maximum"] <= MAX_ID, (method, path, field)


def test_the_text_table_covers_every_text_field_of_the_document():
    """A free text (a string without a fixed choice or format, or a JSON object) anywhere in a request body
    is in TEXT_FIELDS, so NUL and lone surrogates are tried on each."""
    template = {"CONVERSATION": "{conversation_id}", "PERSON": "{person_id}", "ROOM": "{room_id}"}
    texts = {
        (method, path, field)
        for method, path, field, schema in _inputs(_document())
        if (schema.get("type") == "string" and not {"enum", "const", "format"} & schema.keys())
        or (schema.get("type") == "object" and "properties" not in schema)
    }
    tried = set()
    for method, path, _body, field in TEXT_FIELDS:
        for placeholder, name in template.items():
            path = path.replace(placeholder, name)
        tried.add((method, path, re.sub(r"\[\d+\]", "[]", field)))
    assert texts == tried


BIG = 10**20  # beyond PostgreSQL's bigint


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("get", "/internal/v1/memories?kind=procedure&room_id=ROOM&model_location=local&limit=BIG", None, "limit"),
        ("get", "/internal/v1/memories?kind=procedure&room_id=ROOM&model_location=local&offset=BIG", None, "offset"),
        ("get", "/internal/v1/memories?kind=procedure&room_id=ROOM&model_location=local&limit=101", None, "limit"),
        ("get", "/internal/v1/memories?kind=procedure&room_id=BIG&model_location=local", None, "room_id"),
        ("get", "/internal/v1/people/PERSON/memories?model_location=local&offset=BIG", None, "offset"),
        ("get", "/internal/v1/people/PERSON/memories?model_location=local&limit=BIG", None, "limit"),
        ("get", "/internal/v1/people/PERSON/memories?model_location=local&offset=-1", None, "offset"),
        ("get", "/internal/v1/memories/BIG?room_id=ROOM&model_location=local", None, "memory_id"),
        ("get", "/internal/v1/memories/1?room_id=BIG&model_location=local", None, "room_id"),
        ("get", "/internal/v1/people/BIG", None, "person_id"),
        ("get", "/internal/v1/people/0", None, "person_id"),
        ("delete", "/internal/v1/rooms/BIG", None, "room_id"),
        ("post", "/internal/v1/conversations/BIG/end", None, "conversation_id"),
        ("get", "/internal/v1/conversations/BIG/working_memory", None, "conversation_id"),
        ("post", "/internal/v1/recall", {"query": "Schlüssel", "room_id": "BIG"}, "room_id"),
        ("post", "/internal/v1/recall", {"query": "Schlüssel", "room_id": "ROOM", "limit": "BIG"}, "limit"),
        (
            "post",
            "/internal/v1/memories/forget",
            {"token": "t", "confirm": True, "memory_ids": [1, "BIG"]},
            "memory_ids[1]",
        ),
        ("post", "/internal/v1/sightings", {"person_id": "PERSON", "room_id": "BIG"}, "room_id"),
    ],
)
def test_integers_beyond_their_bounds_are_a_400_naming_the_field(api, home, method, path, body, field):
    """Not PostgreSQL's "bigint out of range" as a 500, nor a 404 for an id no row can have."""
    before = _rows()
    values = {"BIG": BIG, "ROOM": home["room"], "PERSON": home["anna"]}
    path = _path(path.replace("BIG", str(BIG)), home)
    body = {k: values.get(v, v) if isinstance(v, str) else v for k, v in (body or {}).items()}
    if "memory_ids" in body:
        body["memory_ids"] = [values.get(v, v) for v in body["memory_ids"]]
    response = getattr(api, method)(path, body) if method != "get" else api.get(path)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field and response.json()["error"]
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
        "2025-01-01T10:00:00\u0000",
        "2025-01-01T10:00:00\n",
        "2025-01-01T10:00:00\t+01:00",
        "2025-01-01T10:00:00\u200b",
    ],
    ids=lambda value: repr(value),
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
