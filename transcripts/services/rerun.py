"""Re-running extraction (admin action, ``manage.py extract_conversations``): reset under the row lock, queue once.

Allowed for conversations whose extraction is done, failed, skipped or waiting for the model: their status and attempts are
reset and the job is queued through ``conversation_extract_queue`` after commit. A done conversation
extracted again adds nothing twice (its items merge into the memories it made). Never for a
conversation still open, one whose speaker was deleted (blocked), one waiting for a local model, or
one queued or running already; each refusal carries its reason.
"""

import functools
from dataclasses import dataclass, field

from django.db import transaction
from django_q.models import Schedule

from transcripts.models import Conversation, ExtractionStatus
from transcripts.services.extraction.run import RETRY_SCHEDULE, conversation_extract_queue

# waiting_model: a re-run asks the model now (and waits again when it still does not answer).
RERUN_ALLOWED = (
    ExtractionStatus.DONE,
    ExtractionStatus.FAILED,
    ExtractionStatus.SKIPPED,
    ExtractionStatus.WAITING_MODEL,
)
NOT_FOUND = "no such conversation"
STILL_OPEN = "still open: extraction runs after the end"
BLOCKED = "speaker deleted: never extracted (it would become shared memories)"
WAITING_LOCAL = "waiting for a local model: set AI_MEMORY_* to a local provider, or allow personal_memories_to_cloud"
BUSY = "already queued or running"


@dataclass
class RerunResult:
    queued: list[int] = field(default_factory=list)
    refused: dict[int, str] = field(default_factory=dict)  # conversation id -> reason (no text of the conversation)


def _refusal(conversation: Conversation | None) -> str | None:
    if conversation is None:
        return NOT_FOUND
    if conversation.ended_at is None:
        return STILL_OPEN
    if conversation.extraction_blocked or conversation.extraction_status == ExtractionStatus.BLOCKED:
        return BLOCKED
    if conversation.extraction_status == ExtractionStatus.WAITING_LOCAL:
        return WAITING_LOCAL
    if conversation.extraction_status not in RERUN_ALLOWED:
        return BUSY
    return None


@transaction.atomic
def conversations_extract_rerun(*, conversation_ids: list[int]) -> RerunResult:
    """Reset and queue the extraction of each allowed conversation (status queued, attempts 0); say why for the rest."""
    result = RerunResult()
    ids = sorted(set(conversation_ids))
    rows = {c.pk: c for c in Conversation.objects.select_for_update().filter(pk__in=ids).order_by("pk")}
    for pk in ids:
        conversation = rows.get(pk)
        if reason := _refusal(conversation):
            result.refused[pk] = reason
            continue
        conversation.extraction_status = ExtractionStatus.QUEUED
        conversation.extraction_attempts = 0
        conversation.extraction_error = ""
        conversation.save(update_fields=["extraction_status", "extraction_attempts", "extraction_error"])
        Schedule.objects.filter(name=RETRY_SCHEDULE.format(id=pk)).delete()
        transaction.on_commit(functools.partial(conversation_extract_queue, conversation_id=pk))
        result.queued.append(pk)
    return result
