"""Where did you learn that: an extracted memory's page shows the sentence it was said in, who said it and when;
a turn deleted or redacted since keeps the link honest."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Provenance, Source
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import ExtractionStatus, Role
from transcripts.selectors import memory_said
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db
MEMORIES = "/admin/memories/memory/"


@pytest.fixture
def learnt():
    anna = PersonFactory(name="Anna")
    started = timezone.now() - timedelta(hours=1)
    conversation = ConversationFactory(room=RoomFactory(name="Küche"), speaker=anna, started_at=started)
    greeting = TurnFactory(conversation=conversation, role=Role.USER, speaker=anna, text="Hallo!")
    code = TurnFactory(
        conversation=conversation,
        role=Role.USER,
        speaker=anna,
        text="Schönes Wetter heute. Der Code für das Gartentor ist 4711. Bis später!",
    )
    memory = MemoryFactory(
        content="Der Code für das Gartentor ist 4711.",
        language="de",
        provenance=Provenance.EXTRACTED,
        source=Source.SESSION,
        source_ref=f"conversation:{conversation.pk}",
    )
    conversation.extraction_status = ExtractionStatus.DONE
    conversation.extraction_stats = {"memory_ids": [memory.pk], "grounds": {str(memory.pk): [code.pk]}}
    conversation.save()
    return {"conversation": conversation, "memory": memory, "code": code, "greeting": greeting}


def test_the_memory_page_shows_the_sentence_who_said_it_and_when(admin_client, learnt):
    memory, code = learnt["memory"], learnt["code"]
    [said] = memory_said(memory_id=memory.pk, conversation=learnt["conversation"], content=memory.content)
    # the sentence of the turn that holds it, not the turn's small talk
    assert (said["sentence"], said["speaker"], said["at"]) == (
        "Der Code für das Gartentor ist 4711.",
        "Anna",
        code.created_at,
    )
    html = admin_client.get(f"{MEMORIES}{memory.pk}/change/").content.decode()
    trail = html.split("field-learned_from")[1].split("</div>")[0]
    assert '<q class="trail-said">Der Code für das Gartentor ist 4711.</q> (Anna,' in trail
    assert "Schönes Wetter" not in trail and "Hallo" not in trail


def test_a_turn_redacted_or_deleted_since_keeps_the_link_honest(admin_client, learnt):
    memory, code = learnt["memory"], learnt["code"]
    code.text = "Der Code für das Gartentor ist [forgotten]."
    code.save()
    trail = admin_client.get(f"{MEMORIES}{memory.pk}/change/").content.decode().split("field-learned_from")[1]
    assert "Der Code für das Gartentor ist [forgotten]." in trail.split("</div>")[0] and "4711</q>" not in trail
    code_id = code.pk
    code.delete()
    trail = admin_client.get(f"{MEMORIES}{memory.pk}/change/").content.decode().split("field-learned_from")[1]
    assert f"said in turn #{code_id}, which was deleted since" in trail.split("</div>")[0]
    # a memory whose extraction recorded no turns shows the conversation only
    other = MemoryFactory(content="x", source_ref=f"conversation:{learnt['conversation'].pk}")
    trail = admin_client.get(f"{MEMORIES}{other.pk}/change/").content.decode().split("field-learned_from")[1]
    assert "trail-said" not in trail.split("</div>")[0] and "deleted since" not in trail.split("</div>")[0]
