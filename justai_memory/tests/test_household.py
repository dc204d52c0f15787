"""The household orchestration: deleting a person (private memories go, conversations are never extracted afterwards), export."""

import json
import time
from unittest import mock

import pytest
from django.core.management import CommandError, call_command

from justai_core.errors import ApplicationError
from justai_memory.household import person_delete, person_delete_confirm, person_delete_request, person_export
from memories.caller import Caller
from memories.models import AuditEvent, ForgetRequest, Memory, Scope, Tombstone
from memories.services.forget import forget_request_create, memories_forget
from memories.tests.factories import MemoryFactory
from people.models import Person
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, Event, ExtractionStatus, Sighting, Turn
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def anna_and_ben():
    anna, ben, kitchen = PersonFactory(name="Anna"), PersonFactory(name="Ben"), RoomFactory()
    anna_private = [
        MemoryFactory(content="Meine Geheimnummer ist 2468.", scope=Scope.PRIVATE, owner=anna),
        MemoryFactory(content="Ich bin allergisch gegen Erdnüsse.", scope=Scope.PRIVATE, owner=anna),
    ]
    ben_private = MemoryFactory(content="Ich mag Schach.", scope=Scope.PRIVATE, owner=ben)
    shared_about_anna = MemoryFactory(content="Anna hat am 12. Mai Geburtstag.", about=anna)
    return anna, ben, kitchen, anna_private, ben_private, shared_about_anna


def test_deleting_a_person_deletes_their_private_memories_only(anna_and_ben):
    anna, _, _, anna_private, ben_private, shared = anna_and_ben
    result = person_delete(person=anna, actor="admin:1")
    assert result.private_memories_deleted == 2
    assert not Person.objects.filter(pk=anna.pk).exists()
    assert not Memory.objects.filter(pk__in=[m.pk for m in anna_private]).exists()
    assert set(Memory.objects.values_list("pk", flat=True)) == {ben_private.pk, shared.pk}
    shared.refresh_from_db()
    assert shared.about is None
    deleted = AuditEvent.objects.filter(action="deleted", actor="admin:1")
    assert set(deleted.values_list("memory_id", flat=True)) == {m.pk for m in anna_private}


def test_their_conversations_are_blocked_from_extraction_before_they_lose_their_speaker(anna_and_ben):
    anna, ben, kitchen, _, _, _ = anna_and_ben
    ended = ConversationFactory(room=kitchen, speaker=anna, extraction_status=ExtractionStatus.QUEUED)
    TurnFactory(conversation=ended, speaker=anna, text="Meine Geheimnummer ist 2468, merk dir das.")
    extracted = ConversationFactory(room=kitchen, speaker=anna, extraction_status=ExtractionStatus.DONE)
    open_one = ConversationFactory(room=kitchen, speaker=anna)
    # Ben's conversation in which Anna had a turn: her words must not become his (or shared) memories.
    bens = ConversationFactory(room=kitchen, speaker=ben, extraction_status=ExtractionStatus.QUEUED)
    TurnFactory(conversation=bens, speaker=anna, text="Mein Arzt ist Dr. Huber.")
    unrelated = ConversationFactory(room=kitchen, speaker=ben, extraction_status=ExtractionStatus.QUEUED)

    result = person_delete(person=anna, actor="admin:1")

    assert result.conversations_blocked == 4
    for conversation in (ended, extracted, open_one, bens):
        conversation.refresh_from_db()
        assert conversation.extraction_blocked
    # Without the block, this one would now look like an unknown speaker's: shared memories.
    assert ended.speaker is None
    assert ended.extraction_status == ExtractionStatus.BLOCKED
    assert open_one.extraction_status == ExtractionStatus.BLOCKED
    assert extracted.extraction_status == ExtractionStatus.DONE  # history stays
    unrelated.refresh_from_db()
    assert not unrelated.extraction_blocked and unrelated.extraction_status == ExtractionStatus.QUEUED
    assert set(
        Conversation.objects.filter(extraction_blocked=True, speaker__isnull=True).values_list("pk", flat=True)
    ) == {
        ended.pk,
        extracted.pk,
        open_one.pk,
    }
    # Forgetting a person deletes memories, not transcripts.
    assert Turn.objects.filter(conversation=ended).count() == 1


def test_their_private_forget_blocks_and_pending_requests_go_with_them(anna_and_ben):
    anna, _, kitchen, anna_private, _, _ = anna_and_ben
    memories_forget(memory_ids=[anna_private[0].pk], actor="test")
    token, _, _, _ = forget_request_create(
        query="Vergiss meine Allergie gegen Erdnüsse", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    assert token and Tombstone.objects.filter(owner=anna).count() == 1
    person_delete(person=anna, actor="admin:1")
    assert not Tombstone.objects.exists() and not ForgetRequest.objects.exists()


def test_deleting_needs_a_valid_confirmation_token_for_this_person(anna_and_ben):
    anna, ben = anna_and_ben[:2]
    token, _, preview = person_delete_request(person=anna)
    assert preview == {"private_memories": 2, "forget_blocks": 0, "sightings": 0, "conversations_to_block": 0}
    bens_token, _, _ = person_delete_request(person=ben)
    for bad_token, confirm, field in [
        (token, False, "confirm"),
        (token, None, "confirm"),
        (None, True, "token"),
        ("", True, "token"),
        (token + "x", True, "token"),
        (bens_token, True, "token"),  # a token for Ben does not delete Anna
    ]:
        with pytest.raises(ApplicationError) as exc:
            person_delete_confirm(person=anna, token=bad_token, confirm=confirm, actor="api")
        assert exc.value.field == field
    assert Person.objects.filter(pk=anna.pk).exists() and Memory.objects.filter(owner=anna).count() == 2

    deletion = person_delete_confirm(person=anna, token=token, confirm=True, actor="api")
    assert deletion.as_dict() == {
        "person_id": anna.pk,
        "private_memories_deleted": 2,
        "forget_blocks_deleted": 0,
        "sightings_deleted": 0,
        "conversations_blocked": 0,
    }
    assert not Person.objects.filter(pk=anna.pk).exists()


def test_an_expired_delete_token_removes_nothing(anna_and_ben):
    anna = anna_and_ben[0]
    with mock.patch("django.core.signing.time.time", return_value=time.time() - 11 * 60):
        token, _, _ = person_delete_request(person=anna)
    with pytest.raises(ApplicationError) as exc:
        person_delete_confirm(person=anna, token=token, confirm=True, actor="api")
    assert (exc.value.field, exc.value.status) == ("token", 410)
    assert Person.objects.filter(pk=anna.pk).exists()


def test_export_holds_everything_about_and_by_them_and_nothing_private_of_others(anna_and_ben):
    anna, ben, kitchen, anna_private, ben_private, shared_about_anna = anna_and_ben
    bens_note = MemoryFactory(content="Überraschung für Anna.", scope=Scope.PRIVATE, owner=ben, about=anna)
    hers = ConversationFactory(room=kitchen, speaker=anna, language="de")
    TurnFactory(conversation=hers, speaker=anna, text="Merk dir meine PIN.")
    TurnFactory(conversation=hers, role="assistant", text="Gemerkt.")
    bens = ConversationFactory(room=kitchen, speaker=ben)
    TurnFactory(conversation=bens, speaker=ben, text="Was gibt es heute?")
    TurnFactory(conversation=bens, speaker=anna, text="Ich koche Pasta.")
    Sighting.objects.create(person=anna, room=kitchen)
    Event.objects.create(kind="door.open", person=anna, room=kitchen, payload={"door": "front"})
    Event.objects.create(kind="door.open", person=ben, room=kitchen)
    memories_forget(memory_ids=[anna_private[0].pk], actor="test", by_person=anna)

    document = json.loads(json.dumps(person_export(person=anna)))

    assert document["format"] == "justai-memory/person-export/1"
    assert document["person"]["id"] == anna.pk and document["person"]["name"] == "Anna"
    by_id = {m["id"]: m for m in document["memories"]}
    assert set(by_id) == {anna_private[1].pk, shared_about_anna.pk}
    assert by_id[anna_private[1].pk]["relation"] == "owner" and by_id[shared_about_anna.pk]["relation"] == "about"
    assert by_id[shared_about_anna.pk]["content"] == "Anna hat am 12. Mai Geburtstag."
    assert bens_note.pk not in by_id and ben_private.pk not in by_id
    assert [c["id"] for c in document["conversations"]] == [hers.pk]
    assert [t["text"] for t in document["conversations"][0]["turns"]] == ["Merk dir meine PIN."]
    assert [t["text"] for t in document["turns_in_other_conversations"]] == ["Ich koche Pasta."]
    assert len(document["sightings"]) == 1 and document["sightings"][0]["room_id"] == kitchen.pk
    assert [e["payload"] for e in document["events"]] == [{"door": "front"}]
    assert document["forget_blocks"] == {"private": 1, "forgotten_by_them": 1}
    text = json.dumps(document)
    assert "Meine Geheimnummer" not in text  # forgotten: only the count of blocks is left
    assert "Überraschung" not in text and "Schach" not in text and "Was gibt es heute" not in text


def test_export_holds_only_their_own_words_of_their_conversations(anna_and_ben):
    anna, ben, kitchen, *_ = anna_and_ben
    bens_room_note = MemoryFactory(content="Der Tresorcode im Keller ist 7319.", scope=Scope.ROOM, room=kitchen)
    hers = ConversationFactory(room=kitchen, speaker=anna, language="de")
    TurnFactory(conversation=hers, speaker=anna, text="Was steht heute an?")
    TurnFactory(conversation=hers, speaker=ben, text="Mein Passwort ist Tulpe-77, sag es keinem.")
    TurnFactory(conversation=hers, role="assistant", text="Der Tresorcode im Keller ist 7319.")
    TurnFactory(conversation=hers, role="user", speaker=None, text="Wer war das eben?")
    TurnFactory(conversation=hers, speaker=anna, text="Danke, das war alles.")

    document = json.loads(json.dumps(person_export(person=anna)))

    (conversation,) = document["conversations"]
    assert [t["text"] for t in conversation["turns"]] == ["Was steht heute an?", "Danke, das war alles."]
    assert {t["speaker_id"] for t in conversation["turns"]} == {anna.pk}
    text = json.dumps(document)
    assert "Tulpe-77" not in text and "7319" not in text and "Wer war das" not in text
    assert bens_room_note.pk not in {m["id"] for m in document["memories"]}  # not about her: not hers to export


def test_export_person_command_writes_the_document(anna_and_ben, tmp_path, capsys):
    anna = anna_and_ben[0]
    call_command("export_person", str(anna.pk))
    assert json.loads(capsys.readouterr().out)["person"]["id"] == anna.pk
    target = tmp_path / "anna.json"
    call_command("export_person", str(anna.pk), "--output", str(target))
    assert json.loads(target.read_text())["person"]["name"] == "Anna"
    assert target.stat().st_mode & 0o777 == 0o600
    with pytest.raises(CommandError, match="No person with id 0"):
        call_command("export_person", "0")
