"""A conversation asked in windows of its turns, each with what the earlier windows found, the answers merged.

Whole by default, in windows of what the model's context holds; with ``EXTRACTION_WINDOW_USER_TURNS`` = N,
N user turns at a time, each window's prompt showing the two turns before it and listing what was
already noted so that it is not written again. The turns keep their numbers, so grounding checks every
citation against the whole conversation. docs/decisions/0027-extraction-in-windows.md has the measurement
that made one question the default (the code's rules carry corrections, dates and who, which windows
were meant to help a small model with).
"""

import dataclasses
import datetime as dt
from dataclasses import dataclass

from django.conf import settings

from justai_core import ai_router
from transcripts.schemas import Extraction, same_saying
from transcripts.services.extraction.prompt import PromptTurn, extraction_ask, prompt_messages, transcript_lines

CONTEXT_TURNS = 2  # the turns before a window, shown again so that "no, 4712" has its "4711"
MAX_NOTED = 20  # the earlier windows' items listed in a prompt (the latest)


@dataclass(frozen=True)
class Header:
    """What the prompt says about the conversation besides its turns."""

    date: dt.date
    language: str
    room: str
    speaker: str


def transcript_windows(turns: list[PromptTurn], *, max_chars: int, user_turns: int = 0) -> list[list[PromptTurn]]:
    """The turns in consecutive windows of at most ``user_turns`` user turns (0: no bound) and ``max_chars``
    transcript characters each (a longer turn alone); one window when it fits."""
    windows: list[list[PromptTurn]] = [[]]
    size = users = 0
    for turn in turns:
        length = len(turn.text) + len(turn.speaker) + 24  # the line's number, time and role around the text
        full = user_turns and turn.role == "user" and users >= user_turns
        if windows[-1] and (size + length > max_chars or full):
            windows.append([])
            size = users = 0
        windows[-1].append(turn)
        size += length
        users += turn.role == "user"
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


def turns_ask(
    provider: ai_router.Provider,
    turns: list[PromptTurn],
    *,
    header: Header,
    max_chars: int,
    answer: ai_router.Answer,
    user_turns: int | None = None,
) -> Extraction:
    """One question per window of the transcript (with the turns just before it, and what was noted so far); the
    answers merged, their figures summed into ``answer``. The one place a conversation is asked (the service
    and bench/extraction_quality.py)."""
    user_turns = settings.EXTRACTION_WINDOW_USER_TURNS if user_turns is None else user_turns
    extraction = None
    seen: list[PromptTurn] = []
    for window in transcript_windows(turns, max_chars=max_chars, user_turns=user_turns):
        context = seen[-CONTEXT_TURNS:] if user_turns else []
        noted = tuple(item.content for item in extraction.items[-MAX_NOTED:]) if extraction is not None else ()
        asked = ai_router.Answer()
        part = extraction_ask(
            provider=provider,
            messages=prompt_messages(
                date=header.date,
                language=header.language,
                room=header.room,
                speaker=header.speaker,
                lines=transcript_lines([*context, *window]),
                max_chars=max_chars,
                noted=noted,
            ),
            user_chars=sum(len(turn.text) for turn in window if turn.role == "user"),
            answer=asked,
        )
        if answer.first_token_seconds is None and asked.first_token_seconds is not None:
            answer.first_token_seconds = answer.seconds + asked.first_token_seconds
        answer.tokens += asked.tokens
        answer.seconds += asked.seconds
        seen += window
        extraction = part if extraction is None else _merged(extraction, part)
    return extraction
