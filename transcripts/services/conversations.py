"""Conversations: start, append turns, end (which queues the extraction once the end is committed)."""

import functools
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.caller import Caller
from memories.digests import token_keys
from memories.languages import language_check
from memories.limits import MAX_TEXT_CHARS, MAX_TURNS_PER_CALL
from transcripts.models import Conversation, EndedBy, ExtractionStatus, Role, Turn
from transcripts.selectors import conversations_idle
from transcripts.services.extraction.run import conversation_extract_queue, conversations_extract_sweep

NO_TURNS = f"'turns' must hold 1 to {MAX_TURNS_PER_CALL} turns."
ROLE_INVALID = "'role' must be one of: user, assistant, system, tool."
TEXT_EMPTY = "A turn's 'text' must not be empty."
TEXT_TOO_LONG = f"A turn's 'text' is longer than {MAX_TEXT_CHARS} characters."
CONVERSATION_ENDED = "The conversation has ended; start a new one."


@dataclass
class TurnDraft:
    role: str
    text: str
    speaker: object = None


def conversation_start(*, caller: Caller, language: str) -> Conversation:
    """Open a conversation in ``caller``'s room with its speaker (None: unknown) and its model location.

    The cloud rule reads that location for every recall with this conversation: the caller said it (a
    ``Caller`` holds only a resolved one, ``privacy.model_location_of``), never a default.
    """
    language_check(language)
    return Conversation.objects.create(
        room=caller.room, speaker=caller.speaker, language=language, model_location=caller.model_location
    )


@transaction.atomic
def turns_append(*, conversation: Conversation, turns: list[TurnDraft]) -> list[Turn]:
    """Append turns to an open conversation (all or none). A user turn without a speaker is the conversation's speaker's."""
    if not 1 <= len(turns) <= MAX_TURNS_PER_CALL:
        raise ApplicationError(NO_TURNS, field="turns")
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    if locked.ended_at is not None:
        raise ApplicationError(CONVERSATION_ENDED, field="conversation", status=409)
    rows = []
    now = timezone.now()
    for i, draft in enumerate(turns):
        text = (draft.text or "").strip()
        if draft.role not in Role.values:
            raise ApplicationError(ROLE_INVALID, field=f"turns[{i}].role")
        if not text:
            raise ApplicationError(TEXT_EMPTY, field=f"turns[{i}].text")
        if len(text) > MAX_TEXT_CHARS:
            raise ApplicationError(TEXT_TOO_LONG, field=f"turns[{i}].text")
        speaker = draft.speaker
        if speaker is None and draft.role == Role.USER:
            speaker = locked.speaker
        rows.append(
            Turn(
                conversation=locked,
                role=draft.role,
                text=text,
                speaker=speaker,
                created_at=now,
                token_keys=token_keys(text),  # what a forget looks the turn up by
            )
        )
    return Turn.objects.bulk_create(rows)


def _end(locked: Conversation, *, ended_by: str) -> Conversation:
    locked.ended_at = max(timezone.now(), locked.started_at)
    locked.ended_by = ended_by
    locked.extraction_status = ExtractionStatus.QUEUED
    locked.save(update_fields=["ended_at", "ended_by", "extraction_status"])
    transaction.on_commit(functools.partial(conversation_extract_queue, conversation_id=locked.pk))
    return locked


@transaction.atomic
def conversation_end(*, conversation: Conversation) -> Conversation:
    """Mark the conversation ended and queue its extraction after commit. Ending twice changes nothing."""
    locked = Conversation.objects.select_for_update().get(pk=conversation.pk)
    if locked.ended_at is not None:
        return locked
    return _end(locked, ended_by=EndedBy.ASSISTANT)


def conversations_end_idle(*, now=None) -> list[int]:
    """End every open conversation with no new turn for CONVERSATION_IDLE_MINUTES (``ended_by`` idle); returns their ids.

    Each is re-checked under its row lock, so a turn appended meanwhile keeps it open; extraction
    is queued as for any ended conversation.
    """
    cutoff = (now or timezone.now()) - timedelta(minutes=settings.CONVERSATION_IDLE_MINUTES)
    ended = []
    for pk in conversations_idle(before=cutoff).values_list("pk", flat=True):
        with transaction.atomic():
            locked = conversations_idle(before=cutoff).filter(pk=pk).select_for_update(skip_locked=True).first()
            if locked is not None:
                _end(locked, ended_by=EndedBy.IDLE)
                ended.append(pk)
    return ended


def conversations_sweep(*, now=None) -> dict:
    """The periodic sweep: end idle conversations (queued for extraction), then re-queue lost and resumable jobs."""
    ended = conversations_end_idle(now=now)
    return {"ended_idle": len(ended), **conversations_extract_sweep(now=now)}


@transaction.atomic
def conversations_block_extraction(*, person) -> int:
    """Never extract the conversations this person spoke in (call before deleting them: afterwards they look unknown).

    Without this, a deleted speaker's conversations would be extracted as an unknown speaker's,
    that is, as shared memories. Conversations of others in which they had a turn are blocked too.
    Extraction that already ran (or was skipped) keeps its status as history; a running one sees
    the flag when it takes the conversation's lock. Returns how many conversations were marked.
    """
    ids = list(
        Conversation.objects.filter(Q(speaker=person) | Q(turns__speaker=person))
        .values_list("pk", flat=True)
        .distinct()
    )
    conversations = Conversation.objects.filter(pk__in=ids)
    conversations.exclude(
        extraction_status__in=[ExtractionStatus.DONE, ExtractionStatus.SKIPPED, ExtractionStatus.RUNNING]
    ).update(extraction_status=ExtractionStatus.BLOCKED)
    return conversations.update(extraction_blocked=True)
