import factory

from memories.embedders import get_embedder
from memories.models import Kind, Memory, Provenance, Scope, Source, Tombstone


class MemoryFactory(factory.django.DjangoModelFactory):
    """A shared fact embedded with the configured embedder (pass ``embedding=`` for exact vectors)."""

    class Meta:
        model = Memory

    kind = Kind.FACT
    content = factory.Sequence(lambda n: f"Household fact number {n}")
    language = "en"
    provenance = Provenance.CONFIRMED
    source = Source.TOOL
    scope = Scope.SHARED
    embedding = factory.LazyAttribute(lambda o: get_embedder().embed_query(o.content))


class TombstoneFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tombstone

    embedder = factory.LazyFunction(lambda: get_embedder().name)
    scope = Scope.SHARED
    embedding = factory.LazyFunction(lambda: get_embedder().embed_query("forgotten"))
