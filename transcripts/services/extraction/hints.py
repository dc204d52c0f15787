"""What code tells the model about the turns it reads: a relative date's day beside its phrase, a private request
beside the turn it covers, and, after the answer, the turns it left out that code knows hold something to keep.

A small model skips what it is unsure of: a turn with "nächsten Freitag" (it is told to resolve dates and does
not), a turn a person asked to keep to themselves (it reads "private" as "not to remember"). Code reads both
reliably (``dates.relative_dates``, ``Said.private_turns``), so the prompt's lines carry what code read
("nächsten Freitag (2026-03-20)", "[private to Marco: still to remember]"), and a turn of either kind that no item
cites is asked about once more, alone: a short conversation, which a small model reads well.
"""

import dataclasses

from transcripts.schemas import Extraction
from transcripts.services.extraction.dates import relative_dates
from transcripts.services.extraction.phrases import PRIVATE, is_hypothetical, is_question, says_gossip
from transcripts.services.extraction.prompt import PromptTurn
from transcripts.services.extraction.rules import PRIVATE_REQUEST_ONLY_WORDS, Said
from transcripts.services.extraction.words import content_words, digits_read

PRIVATE_HINT = " [private to {speaker}: still to remember]"


def _dated(turn: PromptTurn, said: Said) -> bool:
    return bool(relative_dates(turn.text, today=said.today, language=said.language))


def hinted_turns(turns: list[PromptTurn], said: Said) -> list[PromptTurn]:
    """``turns`` as the prompt shows them: each relative date phrase of a user turn followed by its day in
    parentheses, a turn a private request covers followed by PRIVATE_HINT. Grounding reads the turns as said."""
    hinted = []
    for turn in turns:
        text = turn.text
        if turn.role == "user":
            for span in reversed(relative_dates(text, today=said.today, language=said.language)):
                text = f"{text[: span.end]} ({span.day.isoformat()}){text[span.end :]}"
            if turn.number in said.private_turns and not _request_only(turn):
                text += PRIVATE_HINT.format(speaker=turn.speaker)
        hinted.append(dataclasses.replace(turn, text=text))
    return hinted


def _request_only(turn: PromptTurn) -> bool:
    """A turn that says little besides its private request ("Das bleibt bitte nur für mich.")."""
    return PRIVATE.search(turn.text) is not None and len(content_words(PRIVATE.sub(" ", turn.text))) <= (
        PRIVATE_REQUEST_ONLY_WORDS
    )


def _keepable(turn: PromptTurn, said: Said) -> bool:
    text = turn.text
    return not (
        turn.number in said.unremembered_turns or is_question(text) or is_hypothetical(text) or says_gossip(text)
    )


def left_out(extraction: Extraction, window: list[PromptTurn], said: Said) -> list[int]:
    """The user turns of ``window`` that hold a relative date or a private matter, that the rules would keep, and
    that no item of ``extraction`` cites (nor, citing none, shares its words with): to be asked about again."""
    cited = {turn.number for item in extraction.items for turn in said.cited(item)}
    numbers = {turn.number for turn in window}
    return [
        turn.number
        for turn in said.users  # as said, not as shown
        if turn.number in numbers
        and turn.number not in cited
        and _keepable(turn, said)
        and (_dated(turn, said) or (turn.number in said.private_turns and not _request_only(turn)))
    ]


def user_chars_of(said: Said, numbers) -> int:
    """What the users said in the turns ``numbers`` (the second question's answer bound)."""
    return sum(len(digits_read(turn.text)) for turn in said.users if turn.number in numbers)
