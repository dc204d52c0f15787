"""Forgotten means forgotten in transcripts: the forgotten values leave the kept turns that restate them."""

import json
import re
import unicodedata
from urllib.parse import unquote

import pytest

from justai_memory.household import person_delete
from memories.digests import token_keys
from memories.models import Memory, Scope
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from people.models import Household
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import FORGOTTEN_MARKER, ExtractionStatus, Turn
from transcripts.services.conversations import TurnDraft, turns_append
from transcripts.services.extraction.run import conversation_extract
from transcripts.services.redaction import redacted
from transcripts.services.rerun import conversations_extract_rerun
from transcripts.tests.factories import ConversationFactory, TurnFactory
from transcripts.tests.fake_llm import extraction_answer

pytestmark = pytest.mark.django_db

FIND = "/internal/v1/memories/find_to_forget"
FORGET = "/internal/v1/memories/forget"
PASSWORD = "Das WLAN-Passwort ist Sonnenblume-8812."
SAID = "Übrigens, das WLAN-Passwort ist Sonnenblume-8812. Und die Heizung im Bad tropft seit Montag."
BUS = "Der Bus 8812 fährt morgen um sieben Uhr am Bahnhof ab."  # the same number, a fact of its own


@pytest.fixture
def home(usem3):
    anna, kitchen = PersonFactory(name="Anna"), RoomFactory()
    memory = MemoryFactory(content=PASSWORD, language="de", embedding=usem3.embed_documents([PASSWORD])[0])
    said = ConversationFactory(speaker=anna, room=kitchen, language="de")
    turn = TurnFactory(conversation=said, role="user", speaker=anna, text=SAID)
    other = ConversationFactory(speaker=anna, room=kitchen, language="de")
    bus = TurnFactory(conversation=other, role="user", speaker=anna, text=BUS)
    return anna, kitchen, memory, turn, bus


def forget_through_the_api(api, anna, kitchen, query="Vergiss das WLAN-Passwort"):
    found = api.post(FIND, {"query": query, "room_id": kitchen.pk, "speaker_id": anna.pk, "model_location": "local"})
    ids = [c["id"] for c in found.json()["candidates"]]
    response = api.post(
        FORGET, {"token": found.json()["token"], "confirm": True, "speaker_id": anna.pk, "memory_ids": ids}
    )
    assert response.status_code == 200, response.json()
    return response.json()


def test_forgetting_redacts_the_value_in_the_turn_that_said_it_and_nothing_else(api, home):
    anna, kitchen, memory, turn, bus = home
    before = Turn.objects.count()
    assert forget_through_the_api(api, anna, kitchen)["memory_ids"] == [memory.pk]
    turn.refresh_from_db()
    assert "8812" not in turn.text and "sonnenblume" not in turn.text.casefold()
    assert (
        turn.text
        == f"Übrigens, das {FORGOTTEN_MARKER} ist {FORGOTTEN_MARKER}. Und die Heizung im Bad tropft seit Montag."
    )
    bus.refresh_from_db()
    assert bus.text == BUS  # the same number in a fact of its own: the block rule keeps it, so does redaction
    assert Turn.objects.count() == before  # the turns and their conversations stay


def test_re_extracting_the_old_conversation_stores_nothing_of_the_forgotten_value(api, home, fake_llm):
    anna, kitchen, _, turn, _ = home

    def echo(request) -> str:
        """An LLM that takes every sentence the user said as a fact (what it would extract from the old turns)."""
        said = re.findall(r"\(user\): (.*)", request.messages[-1]["content"])
        return extraction_answer(facts=[s for line in said for s in re.split(r"(?<=\.)\s+", line) if s])

    forget_through_the_api(api, anna, kitchen)
    conversation = turn.conversation
    conversation.ended_at = conversation.started_at
    conversation.extraction_status = ExtractionStatus.DONE
    conversation.save()
    assert conversations_extract_rerun(conversation_ids=[conversation.pk]).queued == [conversation.pk]
    fake_llm.reply_with(echo)
    conversation = conversation_extract(conversation_id=conversation.pk)
    assert conversation.extraction_status == ExtractionStatus.DONE
    assert "8812" not in fake_llm.requests[-1].prompt
    stored = list(Memory.objects.values_list("content", flat=True))
    assert not [c for c in stored if "8812" in c or "Sonnenblume" in c or FORGOTTEN_MARKER in c], stored
    assert conversation.extraction_stats["skipped_forgotten"] >= 1
    assert json.dumps(conversation.extraction_stats).count("8812") == 0


def test_the_household_setting_off_leaves_transcripts_as_said(api, home):
    anna, kitchen, _, turn, _ = home
    Household.objects.update_or_create(pk=1, defaults={"redact_forgotten_in_transcripts": False})
    forget_through_the_api(api, anna, kitchen)
    turn.refresh_from_db()
    assert turn.text == SAID


def test_forget_everything_redacts_too(api, home):
    anna, _, memory, turn, bus = home
    Memory.objects.filter(pk=memory.pk).update(scope=Scope.PRIVATE, owner=anna)
    request = api.post(f"/internal/v1/people/{anna.pk}/forget_everything").json()
    assert request["memory_ids"] == [memory.pk]
    response = api.post(FORGET, {"token": request["token"], "confirm": True, "speaker_id": anna.pk})
    assert response.status_code == 200
    turn.refresh_from_db()
    bus.refresh_from_db()
    assert "8812" not in turn.text and FORGOTTEN_MARKER in turn.text and bus.text == BUS


def test_deleting_a_person_redacts_their_private_memories_values(home):
    anna, _, memory, turn, bus = home
    Memory.objects.filter(pk=memory.pk).update(scope=Scope.PRIVATE, owner=anna)
    ben = PersonFactory(name="Ben")
    bens_turn = TurnFactory(conversation=ConversationFactory(speaker=ben, room=RoomFactory()), text=SAID, speaker=ben)
    deletion = person_delete(person=anna, actor="admin:1")
    assert deletion.private_memories_deleted == 1 and deletion.forget_blocks_deleted == 0
    for row in (turn, bens_turn):
        row.refresh_from_db()
        assert "8812" not in row.text and FORGOTTEN_MARKER in row.text
    bus.refresh_from_db()
    assert bus.text == BUS


def test_an_admin_deletion_redacts_through_the_same_follow_up(home):
    _, _, memory, turn, _ = home
    memories_forget(memory_ids=[memory.pk], actor="admin:1")
    turn.refresh_from_db()
    assert "8812" not in turn.text


@pytest.mark.meaning_blind("merges spans of text: nothing is embedded")
def test_redacted_merges_overlapping_spans():
    text = "Konto 1234 5678 bitte"
    assert redacted(text, [(6, 10), (11, 15), (6, 15)]) == f"Konto {FORGOTTEN_MARKER} bitte"


# The forgotten password as kept turns may say it: in a URL query or fragment (percent-encoded), JSON (with an
# escape), key=value, another language, another case or width, inside a longer sentence, a space for the hyphen.
FORMS = [
    "Einrichten: http://192.168.178.1/setup?ssid=Heim&psk=Sonnenblume-8812",
    "https://router.example/gast#psk=Sonnenblume%2D8812",
    '{"ssid": "Heim", "psk": "Sonnenblume-8812"}',
    '{"wlan": {"passwort": "\\u0053onnenblume-8812"}}',
    "wlan_psk=SONNENBLUME_8812; band=5GHz",
    "Per entrare nella rete di casa usa Sonnenblume-8812.",
    "For the guest network just type sonnenblume-8812 when it asks.",
    "Gäste-WLAN: \uff33\uff4f\uff4e\uff4e\uff45\uff4e\uff42\uff4c\uff55\uff4d\uff45\uff0d\uff18\uff18\uff11\uff12",
    "Als Tante Gerda zu Besuch war, hat Lukas ihr Sonnenblume 8812 auf einen Zettel geschrieben, damit sie ins "
    "Internet kommt.",
]
# The same digits, or the same word, in facts of their own.
UNRELATED = [
    BUS,
    '{"linie": 8812, "haltestelle": "Rathaus", "abfahrt": "09:00"}',
    "https://fahrplan.example/abfahrt?linie=8812&halt=Rathaus",
    "Il treno 8812 per Milano parte alle nove.",
    "Im Garten blüht die erste Sonnenblume.",
]


def as_read(text: str) -> str:
    """``text`` as a reader sees it: JSON and percent escapes decoded, NFKC, case-folded."""
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    return unicodedata.normalize("NFKC", unquote(unquote(text))).casefold()


@pytest.fixture
def forms_home(e5):
    """The shipped default embedder (e5-small; its blocks are made in usem3's space), a kept turn per form."""
    anna, kitchen = PersonFactory(name="Anna"), RoomFactory()
    memory = MemoryFactory(content=PASSWORD, language="de", embedding=e5.embed_documents([PASSWORD])[0])
    conversation = ConversationFactory(speaker=anna, room=kitchen, language="de")
    said = [TurnFactory(conversation=conversation, role="user", speaker=anna, text=text) for text in FORMS]
    unrelated = [TurnFactory(conversation=conversation, role="user", speaker=anna, text=text) for text in UNRELATED]
    return anna, kitchen, memory, said, unrelated


def test_a_forgotten_value_is_redacted_in_every_form_a_reader_sees_and_the_same_digits_stay(api, forms_home):
    anna, kitchen, memory, said, unrelated = forms_home
    assert forget_through_the_api(api, anna, kitchen)["memory_ids"] == [memory.pk]
    for turn in said:
        turn.refresh_from_db()
        read = as_read(turn.text)
        assert "8812" not in read and "sonnenblume" not in read and FORGOTTEN_MARKER in turn.text, turn.text
    assert said[5].text == f"Per entrare nella rete di casa usa {FORGOTTEN_MARKER}."  # the rest of the turn stays
    assert said[0].text.startswith("Einrichten: http://192.168.178.1/setup?ssid=Heim&psk=")
    for turn, text in zip(unrelated, UNRELATED, strict=True):
        turn.refresh_from_db()
        assert turn.text == text


def test_re_extraction_stores_nothing_carrying_a_forgotten_value_in_any_form(api, forms_home, fake_llm, settings):
    """With redaction off the turns keep the value as said: the block rule alone keeps it from memory."""
    settings.EXTRACTION_WINDOW_USER_TURNS = 0  # one question: the fake answers every turn at once
    anna, kitchen, _, said, _ = forms_home
    Household.objects.update_or_create(pk=1, defaults={"redact_forgotten_in_transcripts": False})
    forget_through_the_api(api, anna, kitchen)
    conversation = said[0].conversation
    conversation.ended_at = conversation.started_at
    conversation.extraction_status = ExtractionStatus.DONE
    conversation.save()
    assert conversations_extract_rerun(conversation_ids=[conversation.pk]).queued == [conversation.pk]
    # An LLM that takes every turn the user said as a fact, word for word.
    fake_llm.reply_with(lambda request: extraction_answer(facts=[*FORMS, *UNRELATED]))
    conversation = conversation_extract(conversation_id=conversation.pk)
    assert conversation.extraction_status == ExtractionStatus.DONE
    stored = list(Memory.objects.values_list("content", flat=True))
    assert not [c for c in stored if "8812" in as_read(c) and "sonnenblume" in as_read(c)], stored
    assert conversation.extraction_stats["skipped_forgotten"] >= len(FORMS)
    # the bus fact is kept (its "morgen" written as the date it means)
    assert [
        c for c in stored if "Bus 8812" in c and "Bahnhof" in c
    ] and "Im Garten blüht die erste Sonnenblume." in stored


def test_a_forget_reads_the_turns_its_value_keys_find_and_keys_the_turns_never_read(api, home):
    """The kept turns are found by their value keys (a GIN index), not read one by one: a turn whose keys hold none
    of the forgotten values is not read; a turn made without keys (NULL) is read once, and keyed."""
    anna, kitchen, _, turn, bus = home  # made by the factory: no keys yet
    assert Turn.objects.get(pk=turn.pk).token_keys is None
    [appended] = turns_append(conversation=turn.conversation, turns=[TurnDraft(role="user", text=SAID, speaker=anna)])
    assert appended.token_keys == token_keys(SAID) != []
    unread = TurnFactory(conversation=turn.conversation, role="user", speaker=anna, text=SAID)
    Turn.objects.filter(pk=unread.pk).update(token_keys=[])  # its keys say it holds no value
    forget_through_the_api(api, anna, kitchen)
    for row in (turn, appended):
        row.refresh_from_db()
        assert "8812" not in row.text and row.token_keys == token_keys(row.text), row.text
    unread.refresh_from_db()
    assert unread.text == SAID  # only the keys decide which turns a forget reads
    bus.refresh_from_db()
    assert bus.text == BUS and bus.token_keys == token_keys(BUS)
