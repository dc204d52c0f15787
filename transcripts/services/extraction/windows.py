"""A long conversation asked in windows of its turns, the answers merged."""

import dataclasses

from justai_core import ai_router
from transcripts.schemas import (
    Extraction,
    same_saying,
)
from transcripts.services.extraction.prompt import PromptTurn, conversation_prompt, extraction_ask


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


def windows_ask(provider, conversation, turns, *, max_chars: int, answer: ai_router.Answer) -> Extraction:
    """One question per window of the transcript (its turns keep their numbers); the answers merged, their
    figures summed into ``answer``."""
    extraction = None
    for window in transcript_windows(turns, max_chars=max_chars):
        asked = ai_router.Answer()
        part = extraction_ask(
            provider=provider,
            messages=conversation_prompt(conversation, window, max_chars=max_chars),
            user_chars=sum(len(turn.text) for turn in window if turn.role == "user"),
            answer=asked,
        )
        if answer.first_token_seconds is None and asked.first_token_seconds is not None:
            answer.first_token_seconds = answer.seconds + asked.first_token_seconds
        answer.tokens += asked.tokens
        answer.seconds += asked.seconds
        extraction = part if extraction is None else _merged(extraction, part)
    return extraction
