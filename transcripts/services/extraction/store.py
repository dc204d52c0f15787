"""The store: a grounded answer's items and summary as memories, in one batch, with the run's stats."""

from memories.actors import Actor
from memories.embedding_space import active_embedder
from memories.languages import detection_languages
from memories.models import Memory, Provenance, Scope, Source
from memories.services.store import MemoryDraft, StoreOutcome, memory_store, memory_store_batch
from people.models import Person
from transcripts.models import FORGOTTEN_MARKER, Conversation, Turn
from transcripts.schemas import (
    ExtractedItem,
    Extraction,
)
from transcripts.services.extraction.grounding import Grounding
from transcripts.services.extraction.rules import item_ruled

ACTOR = Actor.job("memory.extract")
MAX_REJECTIONS_KEPT = 20  # per conversation, in its stats (the count is complete)


def _draft(
    item: ExtractedItem, conversation: Conversation, languages: frozenset[str], people: dict | None = None
) -> MemoryDraft:
    """An extracted item as a memory draft: a guess is ``inferred``; an unknown speaker's items are all shared,
    except what a known person asked to keep to themselves (private to that person, whoever the speaker is).

    Its language is the one it is written in (detected among ``languages``); too short to tell: the
    conversation's, then the speaker's.
    """
    speaker = conversation.speaker
    item = item_ruled(item, speaker=speaker.name if speaker is not None else None)
    scope, about_speaker = (item.scope, item.about_speaker) if speaker is not None else (Scope.SHARED, False)
    said_by = (people or {}).get(item.speaker.casefold()) if item.speaker else None
    owner = speaker
    if item.scope == Scope.PRIVATE and said_by is not None:
        owner, scope = said_by, Scope.PRIVATE
    return MemoryDraft.build(
        content=item.content,
        provenance=Provenance.INFERRED if item.inferred else Provenance.EXTRACTED,
        source=Source.SESSION,
        conversation_language=conversation.language,
        person=speaker,
        languages=languages,
        kind=item.kind,
        scope=scope,
        owner=owner,  # memory_store keeps only what the scope uses (scope_holders)
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
            if grounding is not None and grounding.summary_grounds:
                stats["grounds"][str(result.memory.pk)] = list(grounding.summary_grounds)


def _turn_speakers(conversation: Conversation):
    return Turn.objects.filter(conversation=conversation, speaker__isnull=False).values("speaker")


def _earlier_grounds(conversation: Conversation) -> dict:
    """The turns an earlier run of this conversation cited for memories that still exist: a re-extraction adds to
    them, so "where did you learn that" stays answered for what it does not find again."""
    earlier = (conversation.extraction_stats or {}).get("grounds") or {}
    alive = {str(pk) for pk in Memory.objects.filter(pk__in=[int(pk) for pk in earlier]).values_list("pk", flat=True)}
    return {pk: list(turns) for pk, turns in earlier.items() if pk in alive}


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
        "grounds": _earlier_grounds(conversation),
        "created": 0,
        "merged": 0,
        "skipped_forgotten": 0,
        "memory_ids": [],
    }
    # An item that mentions a redacted value restates something forgotten: dropped like a blocked one.
    redacted = [FORGOTTEN_MARKER in item.content.casefold() for item in extraction.items]
    kept = [index for index, gone in enumerate(redacted) if not gone]
    people = {person.name.casefold(): person for person in Person.objects.filter(pk__in=_turn_speakers(conversation))}
    stored = memory_store_batch(
        drafts=[_draft(extraction.items[index], conversation, languages, people) for index in kept],
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
