"""Writes of the people app."""

import logging
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from memories.models import AuditAction, Memory, Scope
from memories.services.audit import audit_record
from people.models import Person
from transcripts.models import Conversation, ExtractionStatus

logger = logging.getLogger(__name__)

# Extraction that already ran (or was skipped) keeps its status as history; everything else is blocked.
EXTRACTION_FINISHED = (ExtractionStatus.DONE, ExtractionStatus.SKIPPED)


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
    conversations = Conversation.objects.filter(Q(speaker=person) | Q(turns__speaker=person)).distinct()
    conversation_ids = list(conversations.values_list("pk", flat=True))
    blocked = Conversation.objects.filter(pk__in=conversation_ids)
    blocked.update(extraction_blocked=True)
    blocked.exclude(extraction_status__in=EXTRACTION_FINISHED).update(extraction_status=ExtractionStatus.BLOCKED)
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
        len(conversation_ids),
    )
    return PersonDeletion(
        person_id=person_id, private_memories_deleted=len(memory_ids), conversations_blocked=len(conversation_ids)
    )
