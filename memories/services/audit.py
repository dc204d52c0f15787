"""The text-free audit trail."""

from collections.abc import Iterable

from memories.models import AuditAction, AuditEvent


def audit_record(
    *, memory_ids: Iterable[int], action: AuditAction, actor: str, related_memory_id: int | None = None, count: int = 1
) -> list[AuditEvent]:
    """Append one text-free event per memory id."""
    return AuditEvent.objects.bulk_create(
        AuditEvent(memory_id=pk, action=action, actor=actor, related_memory_id=related_memory_id, count=count)
        for pk in memory_ids
    )
