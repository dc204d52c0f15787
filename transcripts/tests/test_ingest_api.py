"""Sightings, events and observed memories through the internal API."""

from datetime import UTC, datetime

import pytest

from memories.models import Memory
from memories.services.forget import memories_forget
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Event, Sighting

pytestmark = pytest.mark.django_db


def test_a_sighting_is_recorded(api):
    anna, hall = PersonFactory(), RoomFactory()
    response = api.post(
        "/internal/v1/sightings", {"person_id": anna.pk, "room_id": hall.pk, "seen_at": "2025-03-14T08:15:00+01:00"}
    )
    assert response.status_code == 201
    sighting = Sighting.objects.get(pk=response.json()["id"])
    assert (sighting.person, sighting.room, sighting.seen_at) == (anna, hall, datetime(2025, 3, 14, 7, 15, tzinfo=UTC))


@pytest.mark.parametrize(
    ("payload", "field"),
    [({"room_id": "ROOM"}, "person_id"), ({"person_id": "PERSON", "room_id": "ROOM", "seen_at": "gestern"}, "seen_at")],
)
def test_a_bad_sighting_names_the_field(api, payload, field):
    anna, hall = PersonFactory(), RoomFactory()
    values = {"ROOM": hall.pk, "PERSON": anna.pk}
    response = api.post("/internal/v1/sightings", {k: values.get(v, v) for k, v in payload.items()})
    assert response.status_code == 400 and response.json()["field"] == field
    assert not Sighting.objects.exists()


def test_an_event_is_recorded_with_its_payload(api):
    garden = RoomFactory()
    response = api.post(
        "/internal/v1/events", {"kind": "door.opened", "payload": {"door": "Gartentor"}, "room_id": garden.pk}
    )
    assert response.status_code == 201
    event = Event.objects.get(pk=response.json()["id"])
    assert (event.kind, event.payload, event.room, event.person) == ("door.opened", {"door": "Gartentor"}, garden, None)


@pytest.mark.parametrize(("payload", "field"), [({}, "kind"), ({"kind": "x", "payload": [1]}, "payload")])
def test_a_bad_event_names_the_field(api, payload, field):
    response = api.post("/internal/v1/events", payload)
    assert response.status_code == 400 and response.json()["field"] == field


def test_an_observed_memory_carries_its_event(api):
    hall, anna = RoomFactory(), PersonFactory()
    event = Event.objects.create(kind="camera.seen", room=hall, occurred_at=datetime(2025, 3, 14, 7, 0, tzinfo=UTC))
    response = api.post(
        "/internal/v1/memories/observe",
        {
            "content": "Anna hat den Schlüssel in die blaue Dose gelegt.",
            "language": "de",
            "event_id": event.pk,
            "about_id": anna.pk,
            "confidence": 0.8,
        },
    )
    assert response.status_code == 201 and response.json()["outcome"] == "created"
    memory = Memory.objects.get(pk=response.json()["id"])
    assert (memory.provenance, memory.source, memory.source_ref) == ("observed", "event", f"event:{event.pk}")
    assert (memory.scope, memory.about, memory.confidence, memory.valid_at) == ("shared", anna, 0.8, event.occurred_at)
    assert memory.label == "observed"


@pytest.mark.parametrize(
    ("content", "expected"),
    [("La chiave è nella scatola blu in corridoio.", "it"), ("Tür auf", "fr")],
    ids=["detected", "too-short-the-persons"],
)
def test_an_observed_memory_without_a_language_is_detected_else_the_persons(api, content, expected):
    marie = PersonFactory(preferred_language="fr")
    response = api.post("/internal/v1/memories/observe", {"content": content, "about_id": marie.pk})
    assert Memory.objects.get(pk=response.json()["id"]).language == expected


def test_an_observed_room_memory_takes_the_events_room(api):
    hall = RoomFactory()
    event = Event.objects.create(kind="sensor", room=hall)
    response = api.post(
        "/internal/v1/memories/observe",
        {"content": "Die Heizung im Flur ist aus.", "language": "de", "event_id": event.pk, "scope": "room"},
    )
    assert Memory.objects.get(pk=response.json()["id"]).room == hall


def test_a_forgotten_observation_stays_forgotten(api):
    payload = {"content": "Anna war um 3 Uhr nachts in der Küche.", "language": "de"}
    first = api.post("/internal/v1/memories/observe", payload).json()
    memories_forget(memory_ids=[first["id"]], actor="test")
    response = api.post("/internal/v1/memories/observe", payload)
    assert response.status_code == 200 and response.json() == {"id": None, "outcome": "blocked"}
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"language": "de"}, "content"),
        ({"content": "x", "confidence": 2}, "confidence"),
        ({"content": "x", "scope": "private"}, "scope"),
        ({"content": "x", "scope": "everyone"}, "scope"),
        ({"content": "x", "event_id": 999999}, "event_id"),
        ({"content": "x", "language": "Deutsch"}, "language"),
    ],
)
def test_a_bad_observation_names_the_field(api, payload, field):
    response = api.post("/internal/v1/memories/observe", payload)
    assert response.status_code in (400, 404) and response.json()["field"] == field
    assert not Memory.objects.exists()
