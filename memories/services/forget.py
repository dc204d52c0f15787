"""Forgetting: delete the content, keep a text-less tombstone that blocks its return."""

from django.db import transaction

from memories.models import AuditAction, Memory, Tombstone
from memories.services.audit import audit_record
from memories.services.embeddings import embedding_space_verify


@transaction.atomic
def memories_forget(*, memory_ids, actor: str, by_person=None, by_user=None) -> list[Tombstone]:
    """Delete these memories permanently and leave one tombstone each (embedding, embedder, scope; no text)."""
    memories = list(
        Memory.objects.filter(pk__in=list(memory_ids))
        .select_for_update()
        .only("pk", "embedding", "scope", "owner_id", "room_id")
        .order_by("pk")
    )
    if not memories:
        return []
    embedder = embedding_space_verify().embedder
    tombstones = Tombstone.objects.bulk_create(
        Tombstone(
            embedding=m.embedding,
            embedder=embedder,
            scope=m.scope,
            owner_id=m.owner_id,
            room_id=m.room_id,
            forgotten_by_person=by_person,
            forgotten_by_user=by_user,
            memory_id=m.pk,
        )
        for m in memories
    )
    ids = [m.pk for m in memories]
    Memory.objects.filter(pk__in=ids).delete()
    audit_record(memory_ids=ids, action=AuditAction.FORGOTTEN, actor=actor)
    return tombstones
