import factory
from django.utils import timezone

from memories.embedders import get_embedder
from memories.models import Kind, Memory, MemoryAccess, Provenance, Scope, Source, Tombstone


class MemoryFactory(factory.django.DjangoModelFactory):
    """A shared fact embedded with the configured embedder (pass ``embedding=`` for exact vectors).

    ``access_count`` and ``last_accessed_at`` go into the memory's MemoryAccess row.
    """

    class Meta:
        model = Memory

    kind = Kind.FACT
    content = factory.Sequence(lambda n: f"Household fact number {n}")
    language = "en"
    provenance = Provenance.CONFIRMED
    source = Source.TOOL
    scope = Scope.SHARED
    # Embedded as the store path embeds what it keeps: a passage (e5-small tells questions and passages apart).
    embedding = factory.LazyAttribute(lambda o: get_embedder().embed_documents([o.content])[0])

    @classmethod
    def _create(cls, model_class, *args, access_count=0, last_accessed_at=None, **kwargs):
        memory = super()._create(model_class, *args, **kwargs)
        if access_count or last_accessed_at:
            MemoryAccess.objects.create(
                memory=memory, count=access_count, last_accessed_at=last_accessed_at or timezone.now()
            )
        return memory


class TombstoneFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tombstone

    embedder = factory.LazyFunction(lambda: get_embedder().name)
    scope = Scope.SHARED
    embedding = factory.LazyFunction(lambda: get_embedder().embed_query("forgotten"))
