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
import functools
from dataclasses import dataclass

from django.conf import settings

from justai_core import ai_router
from transcripts.schemas import Extraction, same_saying
from transcripts.services.extraction.hints import hinted_turns, left_out, user_chars_of
from transcripts.services.extraction.prompt import PromptTurn, extraction_ask, prompt_messages, transcript_lines
from transcripts.services.extraction.rules import Said

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


def _window_ask(provider, window: list[PromptTurn], *, messages, said: Said, answer) -> Extraction:
    """One window's question (``messages(lines, noted)``) and, when its answer leaves out a turn code knows holds a
    date or a private matter (``hints.left_out``), one more holding only those turns and what the first answer
    noted: a short conversation, which a small model reads well, behind the same system rules (the server's
    cached prefix). The answers merged, the first's summary kept."""
    user_chars = sum(len(turn.text) for turn in window if turn.role == "user")
    part = _asked(provider, messages(transcript_lines(window), ()), user_chars, answer)
    again = left_out(part, window, said) if settings.EXTRACTION_HINTS else []
    if not again:
        return part
    turns = [turn for turn in window if turn.number in again]
    noted = tuple(item.content for item in part.items[-MAX_NOTED:])
    more = _asked(provider, messages(transcript_lines(turns), noted), user_chars_of(said, again), answer)
    return _merged(part, dataclasses.replace(more, summary=None))


def _asked(provider, messages: list[dict], user_chars: int, answer: ai_router.Answer) -> Extraction:
    """One question, its figures summed into ``answer``."""
    asked = ai_router.Answer()
    part = extraction_ask(provider=provider, messages=messages, user_chars=user_chars, answer=asked)
    if answer.first_token_seconds is None and asked.first_token_seconds is not None:
        answer.first_token_seconds = answer.seconds + asked.first_token_seconds
    answer.tokens += asked.tokens
    answer.seconds += asked.seconds
    return part


def _messages(lines, noted, *, header: Header, max_chars: int, context: list[str], earlier: tuple[str, ...]):
    return prompt_messages(
        date=header.date,
        language=header.language,
        room=header.room,
        speaker=header.speaker,
        lines=[*context, *lines],
        max_chars=max_chars,
        noted=(*earlier, *noted)[-MAX_NOTED:],
        hinted=settings.EXTRACTION_HINTS,
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
    """One question per window of the transcript (with the turns just before it, and what was noted so far; a
    relative date's day and a private request shown beside their turns), one more where a window's answer left
    out such a turn; the answers merged, their figures summed into ``answer``. The one place a conversation is
    asked (the service and bench/extraction_quality.py)."""
    user_turns = settings.EXTRACTION_WINDOW_USER_TURNS if user_turns is None else user_turns
    said = Said(turns=turns, today=header.date, language=header.language)
    shown = hinted_turns(turns, said) if settings.EXTRACTION_HINTS else turns
    extraction = None
    seen = 0
    for window in transcript_windows(shown, max_chars=max_chars, user_turns=user_turns):
        context = shown[max(0, seen - CONTEXT_TURNS) : seen] if user_turns else []
        earlier = tuple(item.content for item in extraction.items[-MAX_NOTED:]) if extraction is not None else ()
        messages = functools.partial(
            _messages, header=header, max_chars=max_chars, context=transcript_lines(context), earlier=earlier
        )
        part = _window_ask(provider, window, messages=messages, said=said, answer=answer)
        seen += len(window)
        extraction = part if extraction is None else _merged(extraction, part)
    return extraction
