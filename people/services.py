"""Writes of the people app."""

import logging
from dataclasses import dataclass

from django.db import transaction

from memories.models import AuditAction, Memory, Scope
from memories.services.audit import audit_record
from people.models import Person
from transcripts.services.conversations import conversations_block_extraction

logger = logging.getLogger(__name__)


@dataclass
class PersonDeletion:
    person_id: int
    private_memories_deleted: int
    conversations_blocked: int


@transaction.atomic
def person_delete(*, person: Person, actor: str) -> PersonDeletion:
    """Delete a person with their private memories, and block extraction of every conversation they spoke in.

    Their conversations lose their speaker (SET NULL) and would otherwise be extracted as an unknown
    speaker's, i.e. as shared memories: so each is marked ``extraction_blocked`` first. Conversations
    of others in which they had a turn are blocked too. Transcripts themselves are kept (retention).
    """
    person = Person.objects.select_for_update().get(pk=person.pk)
    conversations_blocked = conversations_block_extraction(person=person)
    private = Memory.objects.filter(scope=Scope.PRIVATE, owner=person)
    memory_ids = list(private.values_list("pk", flat=True))
    private.delete()
    audit_record(memory_ids=memory_ids, action=AuditAction.DELETED, actor=actor)
    person_id = person.pk
    person.delete()
    logger.info(
        "person %s deleted: %d private memories, %d conversations blocked",
        person_id,
        len(memory_ids),
        conversations_blocked,
    )
    return PersonDeletion(
        person_id=person_id, private_memories_deleted=len(memory_ids), conversations_blocked=conversations_blocked
    )
