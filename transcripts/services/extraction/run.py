"""The run (job ``memory.extract``): claim a conversation, ask, ground and store its answer once; retries, waits and the sweep."""

import functools
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule
from django_q.tasks import async_task

from justai_core import ai_router
from justai_core.errors import ApplicationError
from memories.locks import LockId, advisory_lock
from memories.selectors.privacy import memories_allowed_for
from people.models import Person
from transcripts.models import Conversation, ExtractionStatus
from transcripts.schemas import (
    Extraction,
    MalformedAnswer,
)
from transcripts.selectors import (
    EXTRACT_JOB,
    conversations_extraction_lost,
    user_text_length,
)
from transcripts.selectors import (
    EXTRACTION_ROLE as ROLE,
)
from transcripts.services.extraction.grounding import extraction_ground
from transcripts.services.extraction.prompt import PromptTurn, extraction_max_tokens, prompt_turns, transcript_max_chars
from transcripts.services.extraction.rules import Said
from transcripts.services.extraction.store import extraction_store
from transcripts.services.extraction.windows import Header, turns_ask

logger = logging.getLogger(__name__)

MIN_USER_CHARS = 15
RETRY_SCHEDULE = "memory.extract.retry:{id}"
FINISHED = (ExtractionStatus.DONE, ExtractionStatus.SKIPPED, ExtractionStatus.BLOCKED)
GAVE_UP = "gave up after {n} attempts"
SMOKE_MODEL = "nothing: the embedded model is the bundled smoke-test model (manage.py fetch_model gets a real one)"
STORE_REJECTED = "the memory store rejected an item ({field})"


@dataclass
class _Run:
    """The claim of one run: what the LLM is asked, for whom."""

    conversation: Conversation
    provider: ai_router.Provider
    stats: dict = field(default_factory=dict)


def conversation_extract_queue(*, conversation_id: int) -> str:
    """Queue the extraction job for a conversation (its id only); returns the task id."""
    return async_task(
        EXTRACT_JOB, conversation_id, task_name=f"memory.extract:{conversation_id}", group="memory.extract"
    )


def _locked(conversation_id: int) -> Conversation | None:
    return (
        Conversation.objects.select_for_update(of=("self",))
        .select_related("room", "speaker")
        .filter(pk=conversation_id)
        .order_by()
        .first()
    )


def _finish(conversation: Conversation, status: str, *, stats: dict | None = None, error: str = "") -> Conversation:
    conversation.extraction_status = status
    conversation.extraction_error = error[:300]
    fields = ["extraction_status", "extraction_error"]
    if stats is not None:
        conversation.extraction_stats = stats
        fields.append("extraction_stats")
    if status in FINISHED:
        conversation.extracted_at = timezone.now()
        fields.append("extracted_at")
        Schedule.objects.filter(name=RETRY_SCHEDULE.format(id=conversation.pk)).delete()
    conversation.save(update_fields=fields)
    return conversation


@transaction.atomic
def _claim(conversation_id: int) -> tuple[Conversation | None, _Run | None]:
    """Decide under the row lock whether this run calls the LLM; record every other outcome."""
    conversation = _locked(conversation_id)
    if conversation is None or conversation.extraction_status in FINISHED or conversation.ended_at is None:
        return conversation, None
    if conversation.extraction_blocked:
        return _finish(conversation, ExtractionStatus.BLOCKED), None
    user_chars = user_text_length(conversation=conversation)
    if user_chars < MIN_USER_CHARS:
        return _finish(conversation, ExtractionStatus.SKIPPED, stats={"user_chars": user_chars}), None
    if conversation.extraction_attempts >= settings.EXTRACTION_MAX_ATTEMPTS:
        reason = conversation.extraction_error or GAVE_UP.format(n=conversation.extraction_attempts)
        return _finish(conversation, ExtractionStatus.FAILED, error=reason), None
    try:
        provider = ai_router.provider_for(ROLE)
    except ImproperlyConfigured as exc:
        conversation.extraction_attempts += 1
        conversation.save(update_fields=["extraction_attempts"])
        return _failed(conversation, str(exc)), None
    if not memories_allowed_for(model_location=provider.location):
        # Nothing leaves the house: the conversation waits, visibly, until a local model or the admin's consent.
        return _finish(conversation, ExtractionStatus.WAITING_LOCAL), None
    conversation.extraction_attempts += 1
    conversation.extraction_status = ExtractionStatus.RUNNING
    conversation.extraction_error = ""
    conversation.save(update_fields=["extraction_attempts", "extraction_status", "extraction_error"])
    # From the end to this run's start: the queue's share on a first attempt (retries add their delays).
    waited = timezone.now() - conversation.ended_at
    stats = {"user_chars": user_chars, "wait_ms": round(waited.total_seconds() * 1000)}
    return conversation, _Run(conversation=conversation, provider=provider, stats=stats)


def _failed(conversation: Conversation, reason: str) -> Conversation:
    """Record a failure (a text-free reason) and schedule a retry with backoff while attempts are left."""
    _finish(conversation, ExtractionStatus.FAILED, error=reason)
    attempts, limit = conversation.extraction_attempts, settings.EXTRACTION_MAX_ATTEMPTS
    retry = Schedule.objects.filter(name=RETRY_SCHEDULE.format(id=conversation.pk))
    if attempts >= limit:
        retry.delete()
    else:
        delay = settings.EXTRACTION_RETRY_SECONDS * 2 ** max(attempts - 1, 0)
        Schedule.objects.update_or_create(
            name=RETRY_SCHEDULE.format(id=conversation.pk),
            defaults={
                "func": EXTRACT_JOB,
                "args": repr((conversation.pk,)),
                "schedule_type": Schedule.ONCE,
                "repeats": -1,
                "next_run": timezone.now() + timedelta(seconds=delay),
            },
        )
    logger.warning("conversation %s: extraction failed (attempt %s of %s)", conversation.pk, attempts, limit)
    return conversation


@transaction.atomic
def _wait(conversation_id: int, reason: str) -> Conversation | None:
    """Nothing answered at the provider: the conversation waits for it (the attempt does not count, no retry is scheduled)."""
    conversation = _locked(conversation_id)
    if conversation is None:
        return None
    conversation.extraction_attempts = max(conversation.extraction_attempts - 1, 0)
    conversation.save(update_fields=["extraction_attempts"])
    Schedule.objects.filter(name=RETRY_SCHEDULE.format(id=conversation.pk)).delete()
    logger.warning("conversation %s: the model did not answer; waiting for it", conversation.pk)
    return _finish(conversation, ExtractionStatus.WAITING_MODEL, error=reason)


@transaction.atomic
def _fail(conversation_id: int, reason: str) -> Conversation | None:
    conversation = _locked(conversation_id)
    if conversation is None:
        return None
    return _failed(conversation, reason)


def _smoke_stats(grounding) -> dict:
    """What a smoke-test model's answer held, stored nowhere: on the labelled set it stores mostly wrong items."""
    return {
        "extracted": len(grounding.extraction.items),
        "ungrounded": len(grounding.ungrounded),
        "created": 0,
        "merged": 0,
        "memory_ids": [],
        "grounds": {},
        "stored": SMOKE_MODEL,
    }


def _store(run: _Run, extraction: Extraction, llm_ms: int, turns: list[PromptTurn]) -> Conversation | None:
    """All grounded items or none: one transaction, under the row lock."""
    try:
        with transaction.atomic():
            conversation = _locked(run.conversation.pk)
            if conversation is None:
                return None
            if conversation.extraction_blocked:
                return _finish(conversation, ExtractionStatus.BLOCKED)
            started = time.perf_counter()
            names = list(Person.objects.values_list("name", flat=True))
            said = Said(
                turns=turns, today=timezone.localtime(conversation.started_at).date(), language=conversation.language
            )
            grounding = extraction_ground(extraction, turns, names=names, said=said)
            if run.provider.name == "embedded" and settings.AI_MEMORY_SMOKE_MODEL:
                stats = _smoke_stats(grounding)
            else:
                stats = extraction_store(conversation=conversation, extraction=extraction, grounding=grounding)
            stats.update(
                run.stats,
                model=run.provider.model,
                location=run.provider.location,
                llm_ms=llm_ms,
                store_ms=round((time.perf_counter() - started) * 1000),
            )
            return _finish(conversation, ExtractionStatus.DONE, stats=stats)
    except ApplicationError as exc:
        return _fail(run.conversation.pk, STORE_REJECTED.format(field=exc.field or "unknown"))
    except ImproperlyConfigured as exc:  # e.g. the embedder does not match the database
        return _fail(run.conversation.pk, str(exc))


def conversation_extract(*, conversation_id: int) -> Conversation | None:
    """Extract an ended conversation's memories once; None when another run holds it or it is gone.

    Finished, blocked (its speaker was deleted) and short conversations are not sent; with a cloud
    provider and ``personal_memories_to_cloud`` off it waits (``waiting_local``); when nothing answers at the
    provider's URL it waits for the model (``waiting_model``, the attempt not counted). A failed call or a
    malformed answer is recorded with a text-free reason and retried with backoff; nothing is half-stored.
    """
    # Per conversation, session-level: held by a live run, released when its connection dies.
    with advisory_lock(LockId.EXTRACTION, key=conversation_id) as acquired:
        if not acquired:
            logger.info("conversation %s: extraction already running elsewhere", conversation_id)
            return None
        conversation, run = _claim(conversation_id)
        if run is None:
            return conversation
        started = time.perf_counter()
        user_chars = run.stats["user_chars"]
        answer = ai_router.Answer()
        try:
            max_chars = transcript_max_chars(run.provider, extraction_max_tokens(user_chars))
            turns = prompt_turns(conversation)
            header = Header(
                date=timezone.localtime(conversation.started_at).date(),
                language=conversation.language,
                room=conversation.room.name,
                speaker=conversation.speaker.name if conversation.speaker else "unknown",
            )
            extraction = turns_ask(run.provider, turns, header=header, max_chars=max_chars, answer=answer)
        except ai_router.ProviderUnreachable as exc:
            return _wait(conversation_id, str(exc))
        except (ai_router.AIRouterError, ImproperlyConfigured, MalformedAnswer) as exc:
            return _fail(conversation_id, str(exc))
        run.stats.update(answer_tokens=answer.tokens, tokens_per_second=round(answer.tokens_per_second, 1))
        result = _store(run, extraction, round((time.perf_counter() - started) * 1000), turns)
        if result is not None:
            logger.info("conversation %s: extraction %s", conversation_id, result.extraction_status)
        if extraction.note:
            logger.warning("conversation %s: answer %s", conversation_id, extraction.note)
        return result


def conversations_extract_resume() -> int:
    """Queue the conversations waiting for the model once its provider answers (a probe, only when any wait); the count."""
    if not Conversation.objects.filter(extraction_status=ExtractionStatus.WAITING_MODEL).exists():
        return 0
    if not ai_router.provider_status(ROLE)["ok"]:
        return 0
    with transaction.atomic():
        waiting = Conversation.objects.select_for_update().filter(extraction_status=ExtractionStatus.WAITING_MODEL)
        resumed = list(waiting.values_list("pk", flat=True))
        Conversation.objects.filter(pk__in=resumed).update(
            extraction_status=ExtractionStatus.QUEUED, extraction_error=""
        )
        for conversation_id in resumed:
            transaction.on_commit(functools.partial(conversation_extract_queue, conversation_id=conversation_id))
    logger.info("extraction: the model answers again, %s waiting conversation(s) queued", len(resumed))
    return len(resumed)


def conversations_extract_sweep(*, now=None) -> dict:
    """Re-queue ended conversations whose job was lost, and the ones waiting for a local model once they may run."""
    now = now or timezone.now()
    lost = list(
        conversations_extraction_lost(
            ended_before=now - timedelta(minutes=settings.EXTRACTION_LOST_AFTER_MINUTES),
            max_attempts=settings.EXTRACTION_MAX_ATTEMPTS,
        ).values_list("pk", flat=True)
    )
    resumed: list[int] = []
    try:
        allowed = memories_allowed_for(model_location=ai_router.provider_for(ROLE).location)
    except ImproperlyConfigured:
        allowed = False
    with transaction.atomic():
        if allowed:
            waiting = Conversation.objects.select_for_update().filter(extraction_status=ExtractionStatus.WAITING_LOCAL)
            resumed = list(waiting.values_list("pk", flat=True))
            Conversation.objects.filter(pk__in=resumed).update(extraction_status=ExtractionStatus.QUEUED)
        for conversation_id in [*lost, *resumed]:
            transaction.on_commit(functools.partial(conversation_extract_queue, conversation_id=conversation_id))
    if lost or resumed:
        logger.info("extraction sweep: %s lost job(s) re-queued, %s waiting resumed", len(lost), len(resumed))
    return {"requeued": len(lost), "resumed": len(resumed)}
