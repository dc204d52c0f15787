"""Extraction (job ``memory.extract``): an ended conversation's facts, preferences and summary become memories.

One LLM call (role ``memory`` of the AI router), a validated answer, and all items through
``memory_store_batch`` in one transaction: forget blocks drop items (``skipped_forgotten``) and then
the summary is left out; duplicates merge. A run holds a Postgres advisory lock on the conversation,
so parallel runs and retries do the work once; the conversation row is locked while its state changes.
"""

import dataclasses
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
from memories.actors import Actor
from memories.languages import detection_languages, language_for, language_name
from memories.locks import LockId, advisory_lock
from memories.models import Provenance, Scope, Source
from memories.selectors.privacy import memories_allowed_for
from memories.services.embeddings import active_embedder
from memories.services.store import MemoryDraft, StoreOutcome, memory_store, memory_store_batch
from transcripts.models import Conversation, ExtractionStatus
from transcripts.schemas import (
    EXTRACTION_SCHEMA,
    MAX_ITEMS,
    ExtractedItem,
    Extraction,
    MalformedAnswer,
    answer_max_tokens,
    answer_should_stop,
    extraction_parse,
)
from transcripts.selectors import (
    EXTRACT_JOB,
    conversations_extraction_lost,
    transcript_turns,
    user_text_length,
)
from transcripts.selectors import (
    EXTRACTION_ROLE as ROLE,
)
from transcripts.services.redaction import FORGOTTEN_MARKER

logger = logging.getLogger(__name__)

ACTOR = Actor.job("memory.extract")
MIN_USER_CHARS = 15
MAX_TRANSCRIPT_CHARS = 24_000
MIN_TRANSCRIPT_CHARS = 2_000
PROMPT_RULES_TOKENS = 1_000  # the system rules and the header, with room to spare
PROMPT_CHARS_PER_TOKEN = 2.5  # a transcript's characters a token, at the least (German on a small vocabulary)
# The answer's bound from what the users said (extraction_max_tokens): a summary and the JSON around it, and
# per character an item's share of restating it and of its keys.
ANSWER_TOKENS = 200
ANSWER_TOKENS_PER_USER_CHAR = 2.0
USER_CHARS_PER_ITEM = 30
MIN_ITEM_BOUND = 3
RETRY_SCHEDULE = "memory.extract.retry:{id}"
FINISHED = (ExtractionStatus.DONE, ExtractionStatus.SKIPPED, ExtractionStatus.BLOCKED)
GAVE_UP = "gave up after {n} attempts"
MAX_REJECTIONS_KEPT = 20  # per conversation, in its stats (the count is complete)
STOPPED = "stopped at a repeat: {n} items kept"  # a streamed answer ended at its first repeated item (or too many)
STORE_REJECTED = "the memory store rejected an item ({field})"

SYSTEM_PROMPT = """\
You extract long-term memories for a household assistant from one conversation.
Answer with JSON only, in exactly this shape:
{{"facts": [ITEM, ...], "preferences": [ITEM, ...],
  "summary": {{"content": "...", "scope": "shared", "importance": 0.3}}}}
where ITEM is
{{"content": "...", "inferred": false, "subject": "...", "predicate": "...", "scope": "shared",
  "confidence": 0.9, "importance": 0.5, "about_speaker": false}}

Rules:
- facts: lasting facts worth remembering (where things are, codes, appointments, names, relations,
  household routines). preferences: likes, dislikes, habits, how someone wants to be treated.
- Not the assistant's own suggestions, not questions, not small talk.
- inferred: false for what a person said or confirmed; true for what you only conclude from the
  conversation without anyone saying it (a guess, e.g. "Anna probably has a dog" because she
  mentioned walking one). Never present a guess as said.
- Write every content as one self-contained sentence in the language it was said in (the
  conversation is mostly in {language}). Name people instead of writing "I" or "you".
- The conversation took place on {date} ({weekday}). Resolve every relative date or time ("today",
  "tomorrow", "next Friday", "in two weeks", "morgen", "gestern") to an absolute date (YYYY-MM-DD)
  against that date, and write the absolute date in the content.
- scope: "private" for what is personal to the speaker, "room" for what only matters in the room
  "{room}", otherwise "shared" (knowledge of the household).
- about_speaker: true when the item is about the speaker themself.
- subject and predicate: short lowercase keys for what the item is about and which of its
  attributes it states (e.g. "cellar spare key" and "location"); empty strings when there are none.
- confidence: how sure you are that it was meant (0 to 1); importance: how useful it will be later (0 to 1).
- summary: what the conversation was about in 1 to 3 sentences in {language}; an empty content when
  nothing happened worth remembering. Nothing to remember: empty lists.
"""


@dataclass
class _Run:
    """The claim of one run: what the LLM is asked, for whom."""

    conversation: Conversation
    provider: ai_router.Provider
    stats: dict = field(default_factory=dict)


def extraction_max_tokens(user_chars: int | None = None) -> int:
    """The answer's token bound: what the users said allows (ANSWER_TOKENS plus ANSWER_TOKENS_PER_USER_CHAR a
    character), at most what the schema's limits allow and AI_MEMORY_MAX_TOKENS (the server's bound).

    A small model that loops writes until this bound: sized to the transcript, a two-sentence conversation's
    answer ends within a minute even at ~10 tokens a second.
    """
    bound = min(answer_max_tokens(EXTRACTION_SCHEMA), settings.AI_MEMORY_MAX_TOKENS)
    if user_chars is None:
        return bound
    return min(bound, ANSWER_TOKENS + int(user_chars * ANSWER_TOKENS_PER_USER_CHAR))


def extraction_max_items(user_chars: int) -> int:
    """How many items an answer may hold: one per USER_CHARS_PER_ITEM characters the users said, at least
    MIN_ITEM_BOUND; a streamed answer is ended once it writes more (``answer_should_stop``)."""
    return min(MAX_ITEMS, max(MIN_ITEM_BOUND, user_chars // USER_CHARS_PER_ITEM + MIN_ITEM_BOUND))


def transcript_max_chars(provider: ai_router.Provider, max_tokens: int) -> int:
    """How much transcript the prompt holds: MAX_TRANSCRIPT_CHARS, and for the embedded model what its context
    (AI_EMBEDDED_CONTEXT) leaves beside the rules and the answer."""
    if provider.name != "embedded":
        return MAX_TRANSCRIPT_CHARS
    free = settings.AI_EMBEDDED_CONTEXT - max_tokens - PROMPT_RULES_TOKENS
    return max(MIN_TRANSCRIPT_CHARS, min(MAX_TRANSCRIPT_CHARS, int(free * PROMPT_CHARS_PER_TOKEN)))


def extraction_ask(
    *, provider: ai_router.Provider, messages: list[dict], user_chars: int, answer: ai_router.Answer | None = None
) -> Extraction:
    """Ask the model (streamed, bounded by the transcript's size, ended at its first repeated item) and parse
    its answer. The one place the question is asked: the service and bench/extraction_quality.py."""
    answer = answer if answer is not None else ai_router.Answer()
    text = ai_router.chat_complete(
        provider=provider,
        messages=messages,
        schema=EXTRACTION_SCHEMA,
        schema_name="memory_extraction",
        max_tokens=extraction_max_tokens(user_chars),
        stop_when=functools.partial(answer_should_stop, max_items=extraction_max_items(user_chars)),
        answer=answer,
    )
    extraction = extraction_parse(text=text)
    if answer.stopped:
        extraction = dataclasses.replace(extraction, note=STOPPED.format(n=len(extraction.items)))
    return extraction


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


def prompt_messages(
    *, date, language: str, room: str, speaker: str, lines: list[str], max_chars: int = MAX_TRANSCRIPT_CHARS
) -> list[dict]:
    """The system rules and the transcript lines ("[HH:MM] who (role): text"), with the speaker, room and date.

    The one place the extraction prompt is built (the service and bench/extraction_quality.py).
    """
    system = SYSTEM_PROMPT.format(
        language=language_name(language),
        date=date.isoformat(),
        weekday=date.strftime("%A"),
        room=room,
    )
    transcript = "\n".join(lines)
    if len(transcript) > max_chars:
        # The end of a long conversation holds what was settled; keep that.
        transcript = "[... earlier part left out ...]\n" + transcript[-max_chars:]
    user = (
        f'Conversation of {date.isoformat()} ({date:%A}) in the room "{room}".\n'
        f"Speaker: {speaker}.\nLanguage: {language}.\n\nTranscript:\n{transcript}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _prompt(conversation: Conversation, *, max_chars: int = MAX_TRANSCRIPT_CHARS) -> list[dict]:
    """The prompt of a stored conversation (``prompt_messages``)."""
    lines = []
    for turn in transcript_turns(conversation=conversation):
        who = turn.speaker.name if turn.speaker else ("unknown person" if turn.role == "user" else "assistant")
        lines.append(f"[{timezone.localtime(turn.created_at):%H:%M}] {who} ({turn.role}): {turn.text}")
    return prompt_messages(
        date=timezone.localtime(conversation.started_at).date(),
        language=conversation.language,
        room=conversation.room.name,
        speaker=conversation.speaker.name if conversation.speaker else "unknown",
        lines=lines,
        max_chars=max_chars,
    )


def _draft(item: ExtractedItem, conversation: Conversation, languages: frozenset[str]) -> MemoryDraft:
    """An extracted item as a memory draft: a guess is ``inferred``; an unknown speaker's items are all shared.

    Its language is the one it is written in (detected among ``languages``); too short to tell: the
    conversation's, then the speaker's.
    """
    speaker = conversation.speaker
    scope = item.scope if speaker is not None else Scope.SHARED
    return MemoryDraft(
        content=item.content,
        provenance=Provenance.INFERRED if item.inferred else Provenance.EXTRACTED,
        source=Source.SESSION,
        kind=item.kind,
        language=language_for(
            text=item.content,
            conversation_language=conversation.language,
            speaker_language=speaker.preferred_language if speaker is not None else None,
            languages=languages,
        ),
        scope=scope,
        owner=speaker,  # memory_store keeps only what the scope uses (scope_holders)
        room=conversation.room,
        about=speaker if speaker is not None and item.about_speaker else None,
        source_ref=f"conversation:{conversation.pk}",
        subject=item.subject,
        predicate=item.predicate,
        confidence=item.confidence,
        importance=item.importance,
        valid_at=conversation.started_at,
    )


def extraction_store(*, conversation: Conversation, extraction: Extraction) -> dict:
    """Store a validated answer's items (embedded once, stored as one batch) and its summary; returns the stats.

    A forget block drops the item and then the summary. The caller holds the transaction (and the
    conversation's row lock): ``conversation_extract`` once the answer is validated, and the bench.
    """
    embedder = active_embedder()
    texts = [item.content for item in extraction.items]
    if extraction.summary:
        texts.append(extraction.summary.content)
    vectors = embedder.embed_documents(texts) if texts else []
    languages = detection_languages(also=(conversation.language,))
    stats = {
        "extracted": len(extraction.items),
        "facts": 0,
        "preferences": 0,
        "inferred": 0,
        "items_rejected": len(extraction.rejected),
        "repeats": extraction.repeats,
        "answer": extraction.note or "whole",
        "rejected": [r.as_dict() for r in extraction.rejected[:MAX_REJECTIONS_KEPT]],
        "created": 0,
        "merged": 0,
        "skipped_forgotten": 0,
        "memory_ids": [],
    }
    # An item that mentions a redacted value restates something forgotten: dropped like a blocked one.
    redacted = [FORGOTTEN_MARKER in item.content.casefold() for item in extraction.items]
    kept = [index for index, gone in enumerate(redacted) if not gone]
    stored = memory_store_batch(
        drafts=[_draft(extraction.items[index], conversation, languages) for index in kept],
        actor=ACTOR,
        embeddings=[vectors[index] for index in kept],
        embedder=embedder,
    )
    results = dict(zip(kept, stored, strict=True))
    stats["skipped_forgotten"] += sum(redacted)
    for index, item in enumerate(extraction.items):
        result = results.get(index)
        if result is None:
            continue
        if result.outcome == StoreOutcome.BLOCKED:
            stats["skipped_forgotten"] += 1
            continue
        stats["facts" if item.kind == "fact" else "preferences"] += 1
        stats["inferred"] += item.inferred
        stats[result.outcome] += 1
        stats["memory_ids"].append(result.memory.pk)
    if extraction.summary is None:
        stats["summary"] = "none"
    elif stats["skipped_forgotten"] or FORGOTTEN_MARKER in extraction.summary.content.casefold():
        # The summary would carry what was forgotten back in, in other words: leave it out.
        stats["summary"] = "left_out"
    else:
        result = memory_store(
            draft=_draft(extraction.summary, conversation, languages),
            actor=ACTOR,
            embedding=vectors[-1],
            embedder=embedder,
        )
        stats["summary"] = result.outcome
        if result.outcome == StoreOutcome.BLOCKED:
            stats["skipped_forgotten"] += 1
        else:
            stats[result.outcome] += 1
            stats["memory_ids"].append(result.memory.pk)
    return stats


def _store(run: _Run, extraction: Extraction, llm_ms: int) -> Conversation | None:
    """All items or none: one transaction, under the row lock."""
    try:
        with transaction.atomic():
            conversation = _locked(run.conversation.pk)
            if conversation is None:
                return None
            if conversation.extraction_blocked:
                return _finish(conversation, ExtractionStatus.BLOCKED)
            started = time.perf_counter()
            stats = extraction_store(conversation=conversation, extraction=extraction)
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
            extraction = extraction_ask(
                provider=run.provider,
                messages=_prompt(conversation, max_chars=max_chars),
                user_chars=user_chars,
                answer=answer,
            )
        except ai_router.ProviderUnreachable as exc:
            return _wait(conversation_id, str(exc))
        except (ai_router.AIRouterError, ImproperlyConfigured, MalformedAnswer) as exc:
            return _fail(conversation_id, str(exc))
        run.stats.update(answer_tokens=answer.tokens, tokens_per_second=round(answer.tokens_per_second, 1))
        result = _store(run, extraction, round((time.perf_counter() - started) * 1000))
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
