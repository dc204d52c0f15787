"""Extraction (job ``memory.extract``): an ended conversation's facts, preferences and summary become memories.

One LLM call (role ``memory`` of the AI router), a validated answer, and all items through
``memory_store_batch`` in one transaction: forget blocks drop items (``skipped_forgotten``) and then
the summary is left out; duplicates merge. A run holds a Postgres advisory lock on the conversation,
so parallel runs and retries do the work once; the conversation row is locked while its state changes.
"""

import dataclasses
import functools
import logging
import re
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
from memories.languages import detection_languages, language_name
from memories.locks import LockId, advisory_lock
from memories.models import Kind, Provenance, Scope, Source
from memories.selectors.privacy import memories_allowed_for
from memories.services.embeddings import active_embedder
from memories.services.store import MemoryDraft, StoreOutcome, memory_store, memory_store_batch
from people.models import Person
from transcripts.models import Conversation, ExtractionStatus
from transcripts.schemas import (
    EXTRACTION_SCHEMA,
    MAX_ITEMS,
    ExtractedItem,
    Extraction,
    MalformedAnswer,
    Rejection,
    answer_max_tokens,
    answer_should_stop,
    extraction_parse,
    same_saying,
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
{{"facts": [ITEM, ...], "preferences": [ITEM, ...], "summary": {{"content": "..."}}}}
where ITEM is {{"content": "...", "turns": [N], "inferred": false, "about": "..."}}

Rules:
- facts: lasting facts worth remembering (where things are, codes, appointments, names, relations,
  household routines). preferences: likes, dislikes, habits, how someone wants to be treated.
- Only what a person said in a user turn. Not what only the assistant said or suggested, not
  questions, not small talk, not hypotheticals.
- turns: the numbers [N] of the user turns that say it. Every number, date, name and code in the
  content must appear in those turns. When a person corrects a value, keep only the corrected one.
- Each thing once: never repeat an item.
- inferred: false for what a person said or confirmed; true for what you only conclude (a guess).
- about: the name of the person the item is about; "" when it is about the household.
- Write every content as one self-contained sentence in the language it was said in (mostly
  {language}). Name people instead of writing "I" or "you".
- The conversation took place on {date} ({weekday}). Resolve relative dates ("tomorrow", "next
  Friday", "morgen", "domani") to YYYY-MM-DD against that date.
- summary: what the conversation was about in one sentence in {language}; "" when nothing worth
  remembering happened. Nothing to remember: empty lists.

Example:
{example}
"""

# One short worked example per conversation language (English for the others).
EXAMPLES = {
    "de": (
        "[1] Lena (user): Der WLAN-Code ist 3141, nein, jetzt 3142. Ich mag keinen Fisch.\n"
        "[2] assistant (assistant): Notiert. Soll ich Tee kaufen?\n"
        '-> {{"facts": [{{"content": "Der WLAN-Code ist 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "Lena mag keinen Fisch.", "turns": [1], "inferred": false, "about": "Lena"}}], '
        '"summary": {{"content": "Lena nannte den WLAN-Code."}}}}'
    ),
    "it": (
        "[1] Lena (user): Il codice del WiFi è 3141, no, ora è 3142. Non mi piace il pesce.\n"
        "[2] assistant (assistant): Annotato. Compro del tè?\n"
        '-> {{"facts": [{{"content": "Il codice del WiFi è 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "A Lena non piace il pesce.", "turns": [1], "inferred": false, '
        '"about": "Lena"}}], "summary": {{"content": "Lena ha detto il codice del WiFi."}}}}'
    ),
    "es": (
        "[1] Lena (user): El código del wifi es 3141, no, ahora es 3142. No me gusta el pescado.\n"
        "[2] assistant (assistant): Anotado. ¿Compro té?\n"
        '-> {{"facts": [{{"content": "El código del wifi es 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "A Lena no le gusta el pescado.", "turns": [1], "inferred": false, '
        '"about": "Lena"}}], "summary": {{"content": "Lena dio el código del wifi."}}}}'
    ),
    "en": (
        "[1] Lena (user): The wifi code is 3141, no, it is 3142 now. I don't like fish.\n"
        "[2] assistant (assistant): Noted. Shall I buy tea?\n"
        '-> {{"facts": [{{"content": "The wifi code is 3142.", "turns": [1], "inferred": false, "about": ""}}], '
        '"preferences": [{{"content": "Lena does not like fish.", "turns": [1], "inferred": false, "about": "Lena"}}], '
        '"summary": {{"content": "Lena gave the wifi code."}}}}'
    ),
}

# The rules that fill in what the model is not asked (an answer that gives them anyway is used where valid).
STATED_CONFIDENCE = 0.9
GUESS_CONFIDENCE = 0.5
IMPORTANCE = {"fact": 0.6, "preference": 0.5, "episode": 0.3}
VALUE_IMPORTANCE = 0.7  # a fact with a number, date or code in it (a code, an appointment)
# Grounding: why an item was dropped (text-free: the path names the item, the rule names turn numbers).
NO_SUCH_TURN = "cites turn {n}, which the conversation does not have"
ASSISTANT_ONLY = "cites only the assistant's turns"
VALUE_NOT_SAID = "a number, date, name or code that the cited user turns do not hold"
_DIGITS = re.compile(r"\d+")
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")  # a resolved relative date: asked for, so not looked for


EXAMPLE_COPIED = "restates the prompt's worked example"
# What the worked examples say (every language's): an item that says it again was copied, not heard.
EXAMPLE_SAYINGS = frozenset(
    same_saying(content) for example in EXAMPLES.values() for content in re.findall(r'"content": "([^"]+)"', example)
)


@dataclass(frozen=True)
class PromptTurn:
    """A turn as the prompt numbers it ([n], from 1): what grounding checks an item against."""

    number: int
    pk: int
    role: str
    text: str
    speaker: str


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
    """The system rules and the transcript lines ("[n] HH:MM who (role): text"), with the speaker, room and date.

    The one place the extraction prompt is built (the service and bench/extraction_quality.py).
    """
    system = SYSTEM_PROMPT.format(
        language=language_name(language),
        date=date.isoformat(),
        weekday=date.strftime("%A"),
        example=EXAMPLES.get(language, EXAMPLES["en"]).format(),
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


def prompt_turns(conversation: Conversation) -> list[PromptTurn]:
    """The conversation's turns as the prompt numbers them."""
    return [
        PromptTurn(
            number=number,
            pk=turn.pk,
            role=turn.role,
            text=turn.text,
            speaker=turn.speaker.name if turn.speaker else ("unknown person" if turn.role == "user" else "assistant"),
        )
        for number, turn in enumerate(transcript_turns(conversation=conversation), start=1)
    ]


def _prompt(conversation: Conversation, turns: list[PromptTurn], *, max_chars: int = MAX_TRANSCRIPT_CHARS):
    """The prompt of a stored conversation (``prompt_messages``), its turns numbered."""
    times = {turn.pk: turn.created_at for turn in transcript_turns(conversation=conversation)}
    lines = [f"[{t.number}] {timezone.localtime(times[t.pk]):%H:%M} {t.speaker} ({t.role}): {t.text}" for t in turns]
    return prompt_messages(
        date=timezone.localtime(conversation.started_at).date(),
        language=conversation.language,
        room=conversation.room.name,
        speaker=conversation.speaker.name if conversation.speaker else "unknown",
        lines=lines,
        max_chars=max_chars,
    )


def _values(text: str) -> set[str]:
    """The numbers of a text (digit runs, without leading zeros; a run of zeros is none)."""
    return {run.lstrip("0") for run in _DIGITS.findall(text) if run.strip("0")}


def _names_in(text: str, names: list[str]) -> set[str]:
    folded = text.casefold()
    return {name for name in names if re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", folded)}


@dataclass(frozen=True)
class Grounding:
    """What grounding kept and why it dropped the rest."""

    extraction: Extraction  # the grounded items (and the summary, unless it was dropped)
    ungrounded: list[Rejection]  # text-free reasons of the dropped items
    grounds: list[tuple[int, ...]]  # per kept item, the ids of the user turns it comes from
    forgotten: int = 0  # items whose value was forgotten from the transcript (counted as skipped_forgotten)
    summary: str = ""  # why the summary was dropped: "left_out" (a forgotten value), "ungrounded"; "" kept


def extraction_ground(extraction: Extraction, turns: list[PromptTurn], *, names: list[str]) -> Grounding:
    """Keep the items grounded in what a person said: the kept ones with the ids of their turns, the dropped
    ones' reasons (text-free).

    An item's cited turns must exist and hold a user turn; every number in it (a resolved YYYY-MM-DD date
    aside) and every household member's name must appear in the cited user turns (a name also as one of
    their speakers). An item that cites no turn is checked against every user turn. A value that is not
    there because it was forgotten (the turn holds the marker) counts as forgotten, and the summary, held
    to the same values against all user turns, is then left out.
    """
    by_number = {turn.number: turn for turn in turns}
    users = [turn for turn in turns if turn.role == "user"]
    kept, grounds, dropped = [], [], []
    forgotten = 0
    for index, item in enumerate(extraction.items):
        path = f"answer.items[{index}]"
        missing = [n for n in item.turns if n not in by_number]
        if missing:
            dropped.append(Rejection(path=path, rule=NO_SUCH_TURN.format(n=missing[0])))
            continue
        cited = [by_number[n] for n in item.turns] if item.turns else users
        said = [turn for turn in cited if turn.role == "user"]
        if not said:
            dropped.append(Rejection(path=path, rule=ASSISTANT_ONLY))
            continue
        if same_saying(item.content) in EXAMPLE_SAYINGS:  # a small model copies the prompt's example
            dropped.append(Rejection(path=path, rule=EXAMPLE_COPIED))
            continue
        if not _heard(item.content, said, names):
            if any(FORGOTTEN_MARKER in turn.text.casefold() for turn in said):
                forgotten += 1
            else:
                dropped.append(Rejection(path=path, rule=VALUE_NOT_SAID))
            continue
        kept.append(item)
        grounds.append(tuple(turn.pk for turn in said))
    summary, why = extraction.summary, ""
    if summary is not None and same_saying(summary.content) in EXAMPLE_SAYINGS:
        summary, why = None, "ungrounded"
    elif summary is not None and not _heard(summary.content, users, names):
        unheard_forgotten = forgotten or any(FORGOTTEN_MARKER in turn.text.casefold() for turn in users)
        summary, why = None, "left_out" if unheard_forgotten else "ungrounded"
    grounded = dataclasses.replace(extraction, items=kept, summary=summary)
    return Grounding(grounded, dropped, grounds, forgotten, why)


def _heard(content: str, said: list[PromptTurn], names: list[str]) -> bool:
    """Whether every number (a resolved YYYY-MM-DD date aside) and household name of ``content`` is in ``said``."""
    heard = "\n".join(turn.text for turn in said)
    if _values(_ISO_DATE.sub(" ", content)) - _values(heard):
        return False
    speakers = {turn.speaker.casefold() for turn in said}
    unheard = _names_in(content, names) - _names_in(heard, names)
    return all(name.casefold() in speakers for name in unheard)


def item_ruled(item: ExtractedItem, *, speaker: str | None) -> ExtractedItem:
    """The item with what the model was not asked filled in by rules (what it gave anyway is kept):

    - about the speaker: the item names the speaker (``about``) as whom it is about;
    - scope: a preference of the speaker is private to them; everything else is the household's (shared);
    - confidence: 0.9 for what was said, 0.5 for a guess;
    - importance: 0.7 for a fact with a number, date or code in it, 0.6 for another fact, 0.5 for a
      preference, 0.3 for a summary.
    """
    about_speaker = item.about_speaker
    if about_speaker is None:
        about_speaker = speaker is not None and item.about.strip().casefold() == speaker.casefold()
    scope = item.scope
    if scope is None:
        scope = Scope.PRIVATE if about_speaker and item.kind == Kind.PREFERENCE else Scope.SHARED
    confidence = item.confidence
    if confidence is None:
        confidence = GUESS_CONFIDENCE if item.inferred else STATED_CONFIDENCE
    importance = item.importance
    if importance is None:
        valued = item.kind == Kind.FACT and _values(item.content)
        importance = VALUE_IMPORTANCE if valued else IMPORTANCE.get(item.kind, IMPORTANCE["fact"])
    return dataclasses.replace(
        item, about_speaker=about_speaker, scope=scope, confidence=confidence, importance=importance
    )


def _draft(item: ExtractedItem, conversation: Conversation, languages: frozenset[str]) -> MemoryDraft:
    """An extracted item as a memory draft: a guess is ``inferred``; an unknown speaker's items are all shared.

    Its language is the one it is written in (detected among ``languages``); too short to tell: the
    conversation's, then the speaker's.
    """
    speaker = conversation.speaker
    item = item_ruled(item, speaker=speaker.name if speaker is not None else None)
    scope, about_speaker = (item.scope, item.about_speaker) if speaker is not None else (Scope.SHARED, False)
    return MemoryDraft.build(
        content=item.content,
        provenance=Provenance.INFERRED if item.inferred else Provenance.EXTRACTED,
        source=Source.SESSION,
        conversation_language=conversation.language,
        person=speaker,
        languages=languages,
        kind=item.kind,
        scope=scope,
        owner=speaker,  # memory_store keeps only what the scope uses (scope_holders)
        room=conversation.room,
        about=speaker if speaker is not None and about_speaker else None,
        source_ref=f"conversation:{conversation.pk}",
        subject=item.subject,
        predicate=item.predicate,
        confidence=item.confidence,
        importance=item.importance,
        valid_at=conversation.started_at,
    )


def _store_summary(conversation, extraction, grounding, stats, embedder, languages, vectors) -> None:
    """The summary after the items: left out when an item was forgotten or it names a forgotten value."""
    if grounding is not None and grounding.summary:
        stats["summary"] = grounding.summary
    elif extraction.summary is None:
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


def extraction_store(*, conversation: Conversation, extraction: Extraction, grounding: Grounding | None = None) -> dict:
    """Store a validated answer's items (embedded once, stored as one batch) and its summary; returns the stats.

    With ``grounding`` (``extraction_ground``), its grounded items are stored: the dropped ones are counted
    (``ungrounded``, their reasons in ``rejected``), and the stats' ``grounds`` map each memory to the ids of
    the turns it comes from.

    A forget block drops the item and then the summary. The caller holds the transaction (and the
    conversation's row lock): ``conversation_extract`` once the answer is validated, and the bench.
    """
    ungrounded = grounding.ungrounded if grounding is not None else []
    grounds = grounding.grounds if grounding is not None else None
    if grounding is not None:
        extraction = grounding.extraction
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
        "ungrounded": len(ungrounded),
        "answer": extraction.note or "whole",
        "rejected": [r.as_dict() for r in [*extraction.rejected, *ungrounded][:MAX_REJECTIONS_KEPT]],
        "grounds": {},
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
    stats["skipped_forgotten"] += sum(redacted) + (grounding.forgotten if grounding is not None else 0)
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
        if grounds is not None:
            cited = stats["grounds"].setdefault(str(result.memory.pk), [])
            cited += [pk for pk in grounds[index] if pk not in cited]
    _store_summary(conversation, extraction, grounding, stats, embedder, languages, vectors)
    return stats


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
            grounding = extraction_ground(extraction, turns, names=names)
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


def transcript_windows(turns: list[PromptTurn], *, max_chars: int) -> list[list[PromptTurn]]:
    """The turns in consecutive windows of at most ``max_chars`` transcript characters each (a longer turn
    alone), so a long conversation is read whole by a model with a small context; one window when it fits."""
    windows: list[list[PromptTurn]] = [[]]
    size = 0
    for turn in turns:
        length = len(turn.text) + len(turn.speaker) + 24  # the line's number, time and role around the text
        if windows[-1] and size + length > max_chars:
            windows.append([])
            size = 0
        windows[-1].append(turn)
        size += length
    return windows


def _merged(first: Extraction, then: Extraction) -> Extraction:
    """Two windows' answers as one: the later window's items that say something new, its summary if any."""
    sayings = {same_saying(item.content) for item in first.items}
    new = [item for item in then.items if same_saying(item.content) not in sayings]
    return dataclasses.replace(
        first,
        items=[*first.items, *new],
        summary=then.summary or first.summary,
        rejected=[*first.rejected, *then.rejected],
        note=first.note or then.note,
        repeats=first.repeats + then.repeats + len(then.items) - len(new),
    )


def _ask_in_windows(provider, conversation, turns, *, max_chars: int, answer: ai_router.Answer) -> Extraction:
    """One question per window of the transcript (its turns keep their numbers); the answers merged, their
    figures summed into ``answer``."""
    extraction = None
    for window in transcript_windows(turns, max_chars=max_chars):
        asked = ai_router.Answer()
        part = extraction_ask(
            provider=provider,
            messages=_prompt(conversation, window, max_chars=max_chars),
            user_chars=sum(len(turn.text) for turn in window if turn.role == "user"),
            answer=asked,
        )
        if answer.first_token_seconds is None and asked.first_token_seconds is not None:
            answer.first_token_seconds = answer.seconds + asked.first_token_seconds
        answer.tokens += asked.tokens
        answer.seconds += asked.seconds
        extraction = part if extraction is None else _merged(extraction, part)
    return extraction


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
            extraction = _ask_in_windows(run.provider, conversation, turns, max_chars=max_chars, answer=answer)
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
