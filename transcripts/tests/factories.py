import factory

from people.tests.factories import RoomFactory
from transcripts.models import Conversation, Role, Turn


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    room = factory.SubFactory(RoomFactory)
    language = "de"
    model_location = "local"  # the model has no default; a test that needs cloud says so


class TurnFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Turn

    conversation = factory.SubFactory(ConversationFactory)
    role = Role.USER
    text = factory.Sequence(lambda n: f"Nachricht {n}")
