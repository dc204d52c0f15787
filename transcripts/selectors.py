"""Reads of the transcripts app: working memory, user text, extraction jobs that are still on their way."""

import ast
import re
from datetime import datetime

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Prefetch, Q, QuerySet, Sum
from django.db.models.functions import Length, Trim
from django_q.models import OrmQ, Schedule

from justai_core import ai_router
from people.models import Person
from transcripts.models import FORGOTTEN_MARKER, Conversation, Event, ExtractionStatus, Role, Sighting, Turn

WORKING_MEMORY_TURNS = 30
# The job's dotted path is stored in queued tasks and retry schedules: keep it stable.
EXTRACT_JOB = "transcripts.jobs.conversation_extract_job"
EXTRACTION_ROLE = "memory"  # the AI router's role that extraction calls
UNREACHABLE_HINT = (
    "Nothing answered at {url} (provider '{provider}', model '{model}'). Start that server, or point the "
    "memory role at one that runs: AI_MEMORY_PROVIDER (ollama, llamacpp, vllm, lmstudio, openai, gemini, "
    "custom), AI_MEMORY_BASE_URL, AI_MEMORY_MODEL (see docs/extraction.md). Then re-run the extraction."
)
WAITING_HINT = (
    "Waiting for the model: nothing answered at {url} (provider '{provider}', model '{model}'). Start that "
    "server, or point the memory role at one that runs: AI_MEMORY_PROVIDER (embedded, ollama, llamacpp, vllm, "
    "lmstudio, openai, gemini, custom), AI_MEMORY_BASE_URL, AI_MEMORY_MODEL (see docs/extraction.md). The "
    "conversation is extracted within a minute of the model answering."
)


def working_memory(*, conversation: Conversation, limit: int = WORKING_MEMORY_TURNS) -> list[dict]:
    """The last ``limit`` turns of the conversation, oldest first: ``{role, speaker_id, text, at}``."""
    latest = list(
        Turn.objects.filter(conversation=conversation)
        .order_by("-created_at", "-id")
        .values("role", "speaker_id", "text", "created_at")[:limit]
    )
    return [
        {"role": t["role"], "speaker_id": t["speaker_id"], "text": t["text"], "at": t["created_at"]}
        for t in reversed(latest)
    ]


def user_text_length(*, conversation: Conversation) -> int:
    """Characters the users said in this conversation (each turn trimmed)."""
    total = Turn.objects.filter(conversation=conversation, role=Role.USER).aggregate(n=Sum(Length(Trim("text"))))["n"]
    return total or 0


def transcript_turns(*, conversation: Conversation) -> QuerySet[Turn]:
    """What the people and the assistant said, in order (system and tool messages left out)."""
    return (
        Turn.objects.filter(conversation=conversation, role__in=[Role.USER, Role.ASSISTANT])
        .select_related("speaker")
        .order_by("created_at", "id")
    )


def extraction_jobs_pending() -> set[int]:
    """Conversation ids that have an extraction job in the queue (waiting or being worked on) or a retry scheduled.

    The ORM broker keeps a task's row until it is acknowledged, so a job that a worker holds is
    still listed here; a job whose worker died is re-delivered by django-q2 itself.
    """
    ids: set[int] = set()
    for item in OrmQ.objects.only("payload"):
        task = item.task
        if task.get("func") == EXTRACT_JOB and task.get("args"):
            ids.add(task["args"][0])
    ids.update(extraction_retries_scheduled())
    return ids


def extraction_retries_scheduled() -> dict[int, datetime]:
    """Conversation id -> when its scheduled extraction (a retry after a failure) runs next."""
    retries: dict[int, datetime] = {}
    for args, next_run in Schedule.objects.filter(func=EXTRACT_JOB).exclude(repeats=0).values_list("args", "next_run"):
        try:
            value = ast.literal_eval(args or "()")
        except (SyntaxError, ValueError):
            continue
        for pk in value if isinstance(value, tuple) else (value,):
            if isinstance(pk, int):
                retries[pk] = min(next_run, retries.get(pk, next_run))
    return retries


def conversations_extraction_lost(*, ended_before: datetime, max_attempts: int) -> QuerySet[Conversation]:
    """Ended conversations that should be on their way to extraction but have no job: queued, running, or failed with attempts left."""
    return (
        Conversation.objects.filter(ended_at__lt=ended_before)
        .filter(
            Q(extraction_status__in=[ExtractionStatus.QUEUED, ExtractionStatus.RUNNING])
            | Q(extraction_status=ExtractionStatus.FAILED, extraction_attempts__lt=max_attempts)
        )
        .exclude(pk__in=extraction_jobs_pending())
        .order_by("ended_at")
    )


def person_conversations(*, person) -> QuerySet[Conversation]:
    """Conversations in which ``person`` was the speaker, oldest first, each with ``own_turns``: the turns
    ``person`` spoke (not the assistant's, not another person's who joined in), prefetched."""
    own_turns = Prefetch(
        "turns", queryset=Turn.objects.filter(speaker=person).order_by("created_at", "id"), to_attr="own_turns"
    )
    return Conversation.objects.filter(speaker=person).order_by("started_at", "id").prefetch_related(own_turns)


def conversation_speakers(*, conversation: Conversation) -> list:
    """Everyone who spoke a turn in the conversation, and its main speaker, by name."""
    spoke = Turn.objects.filter(conversation=conversation, speaker__isnull=False).values("speaker")
    return list(Person.objects.filter(Q(pk=conversation.speaker_id) | Q(pk__in=spoke)).order_by("name"))


def conversations_spoken_in(*, person) -> QuerySet[Conversation]:
    """Conversations in which ``person`` was the main speaker or spoke any turn, newest first."""
    spoke = Turn.objects.filter(speaker=person).values("conversation")
    return Conversation.objects.filter(Q(speaker=person) | Q(pk__in=spoke)).order_by("-started_at", "-id")


def person_turns_elsewhere(*, person) -> QuerySet[Turn]:
    """What ``person`` said in conversations whose speaker was someone else (or unknown)."""
    return Turn.objects.filter(speaker=person).exclude(conversation__speaker=person).order_by("created_at", "id")


def person_sightings(*, person) -> QuerySet:
    return Sighting.objects.filter(person=person).order_by("seen_at", "id")


def person_events(*, person) -> QuerySet:
    return Event.objects.filter(person=person).order_by("occurred_at", "id")


def conversation_ids_with_status(*, status: str) -> list[int]:
    """The ids of the ended conversations whose extraction has ``status``."""
    return list(
        Conversation.objects.filter(extraction_status=status, ended_at__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def conversations_idle(*, before: datetime) -> QuerySet[Conversation]:
    """Open conversations whose last turn (or start, without turns) is older than ``before``."""
    return (
        Conversation.objects.filter(ended_at__isnull=True, started_at__lt=before)
        .exclude(turns__created_at__gte=before)
        .order_by("pk")
    )


def extraction_hint(*, conversation: Conversation) -> str:
    """What the admin can do when the extraction failed or waits because the LLM did not answer (its URL, what to set); else ""."""
    if conversation.extraction_status == ExtractionStatus.WAITING_MODEL:
        return _unreachable_hint(WAITING_HINT)
    if conversation.extraction_status != ExtractionStatus.FAILED:
        return ""
    if ai_router.UNREACHABLE_MARK not in conversation.extraction_error:
        return ""
    return _unreachable_hint(UNREACHABLE_HINT)


def _unreachable_hint(template: str) -> str:
    try:
        provider = ai_router.provider_for(EXTRACTION_ROLE)
    except ImproperlyConfigured as exc:
        return str(exc)
    return template.format(url=ai_router.public_url(provider.base_url), provider=provider.name, model=provider.model)


_SENTENCE_END = re.compile(r"(?<=[.!?…;])\s+|\n+")


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.casefold()))


def memory_said(*, memory_id: int, conversation: Conversation, content: str) -> list[dict]:
    """Where an extracted memory was said: the turns its extraction cited (``stats.grounds``), each as the
    sentence of it closest to the memory, who said it and when. A turn deleted since is listed as gone
    (``{"turn_id": id, "gone": True}``); a redacted one shows its marker. Empty when nothing was recorded."""
    turn_ids = (conversation.extraction_stats or {}).get("grounds", {}).get(str(memory_id), [])
    turns = {t.pk: t for t in Turn.objects.filter(pk__in=turn_ids, conversation=conversation).select_related("speaker")}
    said = []
    wanted = _words(content)
    for turn_id in turn_ids:
        turn = turns.get(turn_id)
        if turn is None:
            said.append({"turn_id": turn_id, "gone": True})
            continue
        sentences = [part for part in _SENTENCE_END.split(turn.text) if part.strip()] or [turn.text]
        sentence = max(sentences, key=lambda part: len(_words(part) & wanted))
        speaker = turn.speaker.name if turn.speaker else None
        said.append(
            {
                "turn_id": turn_id,
                "sentence": sentence,
                "speaker": speaker,
                "speaker_id": turn.speaker_id,
                "at": turn.created_at,
                "redacted": FORGOTTEN_MARKER in turn.text,
            }
        )
    return said


def conversation_of_source(source_ref: str) -> Conversation | None:
    """The conversation a memory's ``source_ref`` names (``conversation:<id>``), if it is still kept."""
    kind, _sep, ref = source_ref.partition(":")
    if kind != "conversation" or not ref.isdigit():
        return None
    return Conversation.objects.filter(pk=int(ref)).first()


def was_party_to(*, conversation: Conversation, person) -> bool:
    """Whether ``person`` (None: an unknown speaker, never) was the conversation's speaker or spoke a turn in it."""
    if person is None:
        return False
    return (
        conversation.speaker_id == person.pk or Turn.objects.filter(conversation=conversation, speaker=person).exists()
    )


def memory_learned_from(*, memory, speaker) -> list[dict]:
    """ "Where did you learn that?" for ``speaker`` (None: unknown), who may see ``memory``: per turn its extraction
    cited, ``{turn_id, status, text, speaker_id, speaker, at}``.

    ``status`` is ``said`` (the sentence of the turn closest to the memory, who said it, when), ``redacted``
    (the same, as the turn reads since a forget redacted it: the marker, never the old text), ``deleted``
    (the turn is gone: only its id) or ``not_shown``: the sentence may hold more than the memory, so it is
    shown only to a speaker who was party to that conversation (its speaker, or spoke a turn in it); an
    unknown speaker, and anyone else, gets the status alone. Empty for a memory that names no kept
    conversation or whose extraction recorded no turns (docs/privacy.md, where a memory was learnt).
    """
    conversation = conversation_of_source(memory.source_ref)
    if conversation is None:
        return []
    said = memory_said(memory_id=memory.pk, conversation=conversation, content=memory.content)
    party = bool(said) and was_party_to(conversation=conversation, person=speaker)
    learned = []
    for entry in said:
        shown = {"turn_id": entry["turn_id"], "text": None, "speaker_id": None, "speaker": None, "at": None}
        if entry.get("gone"):
            learned.append({**shown, "status": "deleted"})
        elif not party:
            learned.append({**shown, "status": "not_shown"})
        else:
            learned.append(
                {
                    **shown,
                    "status": "redacted" if entry["redacted"] else "said",
                    "text": entry["sentence"],
                    "speaker_id": entry["speaker_id"],
                    "speaker": entry["speaker"],
                    "at": entry["at"],
                }
            )
    return learned
