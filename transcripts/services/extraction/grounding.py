"""Grounding: an item is kept only when the user turns it cites hold what it says (its numbers and names)."""

import dataclasses
import re
from dataclasses import dataclass

from transcripts.models import FORGOTTEN_MARKER
from transcripts.schemas import (
    Extraction,
    Rejection,
    same_saying,
)
from transcripts.services.extraction.prompt import EXAMPLE_COPIED, EXAMPLE_SAYINGS, PromptTurn
from transcripts.services.extraction.rules import Said, extraction_said, private_left_out
from transcripts.services.extraction.words import content_words, digits_read, text_values

# Grounding: why an item was dropped (text-free: the path names the item, the rule names turn numbers).
NO_SUCH_TURN = "cites turn {n}, which the conversation does not have"
ASSISTANT_ONLY = "cites only the assistant's turns"
VALUE_NOT_SAID = "a number, date, name or code that the cited user turns do not hold"
EXAMPLE_WORDS = 2  # an example's words in an item, one of them its own thing never said: a near-copy
EXAMPLE_THINGS = frozenset({"lena", "wlan", "wifi", "fisch", "pesce", "pescado", "fish"})  # what the examples are about
SUMMARY_TURNS = 3
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")  # a resolved relative date: asked for, so not looked for
# A time of day is not looked for either: said in words it takes forms no reader turns into digits ("halb acht"
# 19:30, "quarter to ten", "once menos cuarto", "um eins" 13 Uhr).
_TIME_OF_DAY = re.compile(
    r"\b\d{1,2}[:.]\d{2}\b|\b\d{1,2}\s*(?:uhr|h|am|pm|a\.m\.|p\.m\.|o'clock)(?!\w)"
    r"|(?<!\w)(?:um|gegen|ab|bis|von|alle|dalle|verso|a las|las|de las|hasta las|sobre las|at|from|until|till|to)\s+\d{1,2}(?:[:.]\d{2})?\b",
    re.IGNORECASE,
)


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
    summary_grounds: tuple[int, ...] = ()  # the ids of the user turns the summary draws on most


def extraction_ground(extraction: Extraction, turns: list[PromptTurn], *, names: list[str], said: Said) -> Grounding:
    """Keep the items grounded in what a person said: the kept ones with the ids of their turns, the dropped
    ones' reasons (text-free).

    The conversation's rules come first (``extraction_said``: corrections, dates, who, private, and the items a
    person asked not to keep, questions, gossip). Then an item's cited turns must exist and hold a user turn;
    every number in it (a resolved YYYY-MM-DD date aside; numbers said in words count as digits) and every
    household member's name must appear in the cited user turns (a name also as one of their speakers). An
    item that cites no turn is checked against every user turn. A value that is not there because it was
    forgotten (the turn holds the marker) counts as forgotten, and the summary, held to the same values
    against all user turns, is then left out.
    """
    extraction, dropped = extraction_said(extraction, said, names=names)
    by_number = {turn.number: turn for turn in turns}
    users = [turn for turn in turns if turn.role == "user"]
    kept, grounds = [], []
    forgotten = 0
    for index, item in enumerate(extraction.items):
        path = f"answer.items[{index}]"
        heard, reason = _grounded(item, by_number, users, names)
        if reason == VALUE_NOT_SAID and any(FORGOTTEN_MARKER in turn.text.casefold() for turn in heard):
            forgotten += 1
        elif reason:
            dropped.append(Rejection(path=path, rule=reason))
        else:
            kept.append(item)
            grounds.append(tuple(turn.pk for turn in heard))
    for item in private_left_out(kept, said, names=names):  # what the answer left out that a person asked to keep
        heard, reason = _grounded(item, by_number, users, names)
        if not reason:
            kept.append(item)
            grounds.append(tuple(turn.pk for turn in heard))
    summary, why = extraction.summary, ""
    if summary is not None and copies_example(summary.content, users):
        summary, why = None, "ungrounded"
    elif summary is not None and not _heard(summary.content, users, names):
        unheard_forgotten = forgotten or any(FORGOTTEN_MARKER in turn.text.casefold() for turn in users)
        summary, why = None, "left_out" if unheard_forgotten else "ungrounded"
    summary_grounds = _closest_turns(summary.content, users) if summary is not None else ()
    grounded = dataclasses.replace(extraction, items=kept, summary=summary)
    return Grounding(grounded, dropped, grounds, forgotten, why, summary_grounds)


def _grounded(
    item, by_number: dict[int, PromptTurn], users: list[PromptTurn], names: list[str]
) -> tuple[list[PromptTurn], str]:
    """The user turns an item cites (every user turn when it cites none), and why grounding drops it ("" kept)."""
    missing = [n for n in item.turns if n not in by_number]
    if missing:
        return [], NO_SUCH_TURN.format(n=missing[0])
    cited = [by_number[n] for n in item.turns] if item.turns else users
    heard = [turn for turn in cited if turn.role == "user"]
    if not heard:
        return [], ASSISTANT_ONLY
    if copies_example(item.content, users):  # a small model copies the prompt's example
        return heard, EXAMPLE_COPIED
    if not _heard(item.content, heard, names, users):
        return heard, VALUE_NOT_SAID
    return heard, ""


def _heard(content: str, said: list[PromptTurn], names: list[str], present: list[PromptTurn] = ()) -> bool:
    """Whether every number (a resolved YYYY-MM-DD date and a time of day aside) of ``content`` is in ``said``, and
    every household name in ``said`` or among the speakers of ``said`` and ``present`` (who took part)."""
    heard = digits_read("\n".join(turn.text for turn in said))
    if text_values(_TIME_OF_DAY.sub(" ", _ISO_DATE.sub(" ", content))) - text_values(heard):
        return False
    speakers = {turn.speaker.casefold() for turn in [*said, *present]}
    unheard = _names_in(content, names) - _names_in(heard, names)
    return all(name.casefold() in speakers for name in unheard)


def copies_example(content: str, users: list[PromptTurn]) -> bool:
    """Whether ``content`` says what a worked example says: word for word, or with two or more of an example's
    words of which one is the example's own thing (its name, the wifi, the fish) that nobody in the
    conversation said ("Anna merkt den WLAN-Code" where nobody spoke of the WLAN): a small model copies the
    prompt's example."""
    saying = same_saying(content)
    if saying in EXAMPLE_SAYINGS:
        return True
    words = content_words(content)
    said = content_words("\n".join(turn.text for turn in users))
    for example in EXAMPLE_SAYINGS:
        shared = words & content_words(example)
        if len(shared) >= EXAMPLE_WORDS and (shared & EXAMPLE_THINGS) - said:
            return True
    return False


def _closest_turns(content: str, users: list[PromptTurn]) -> tuple[int, ...]:
    """The ids of the user turns a summary draws on most (the most content words in common), at most SUMMARY_TURNS."""
    words = content_words(digits_read(content)) | text_values(content)
    scored = [
        (len(words & (content_words(turn.text) | text_values(digits_read(turn.text)))), -turn.number, turn.pk)
        for turn in users
    ]
    return tuple(pk for shared, _, pk in sorted(scored, reverse=True)[:SUMMARY_TURNS] if shared)
