"""person_delete: their private memories go, their conversations are never extracted afterwards."""

import pytest

from memories.models import AuditEvent, ForgetRequest, Memory, Scope, Tombstone
from memories.services.forget import forget_request_create, memories_forget
from memories.tests.factories import MemoryFactory
from people.models import Person
from people.services import person_delete
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, ExtractionStatus, Turn
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
    token, _, _ = forget_request_create(query="Vergiss meine Allergie gegen Erdnüsse", speaker=anna, room=kitchen)
    assert token and Tombstone.objects.filter(owner=anna).count() == 1
    person_delete(person=anna, actor="admin:1")
    assert not Tombstone.objects.exists() and not ForgetRequest.objects.exists()
