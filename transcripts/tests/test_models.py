from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from people.tests.factories import RoomFactory
from transcripts.models import Conversation, Event, Turn
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "fields",
    [
        {"model_location": "moon"},
        {"extraction_status": "maybe"},
        {"language": "Italiano"},
    ],
)
def test_conversation_rejects_bad_values(fields):
    room = RoomFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Conversation.objects.create(room=room, **{"model_location": "local", **fields})


def test_conversation_cannot_end_before_it_starts():
    conversation = ConversationFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Conversation.objects.filter(pk=conversation.pk).update(ended_at=conversation.started_at - timedelta(seconds=1))


def test_turn_needs_a_known_role_and_text():
    conversation = ConversationFactory()
    for fields in ({"role": "narrator", "text": "hi"}, {"role": "user", "text": ""}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Turn.objects.create(conversation=conversation, **fields)


def test_event_needs_a_kind():
    with pytest.raises(IntegrityError), transaction.atomic():
        Event.objects.create(kind="", occurred_at=timezone.now())
