"""Corrections: the later of a value and its correction wins ("the code is 2468, no, 1357 now").

A value is a number (numbers said in words read as digits), a word with digits (a password) or a weekday. It is superseded when a person
corrects it: in the same turn after a correction word ("2468, nein, 1357"), or in a later user turn that says a
correction word and a value of the same shape (as many digits; a time's hour for an hour; a weekday for a
weekday) while sharing a word with the earlier turn or coming right after it. The assistant's echo ("Noted:
2468") is no one's value. An item or a summary that holds a superseded value gets the correction in its place.
"""

import datetime as dt
import re
from dataclasses import dataclass

from transcripts.services.extraction.dates import WEEKDAY
from transcripts.services.extraction.prompt import PromptTurn
from transcripts.services.extraction.words import content_words, digits_read

CORRECTION_WORDS = (
    r"nein|nee|doch|korrigiere|korrektur|geändert|stimmt nicht|falsch|eigentlich|sondern|verschoben"
    r"|no|nope|nah|not|actually|sorry|correction|changed|reset|wrong|instead|rather|moved"
    r"|non|anzi|scusa|cambiato|cambiata|sbagliato|invece|spostato|spostata"
    r"|perdón|perdona|mejor dicho|cambiado|cambiamos|equivocado|corrijo|en realidad|movido"
)
UPDATE_WORDS = r"jetzt|inzwischen|ab sofort|now|from now on|ora|adesso|d'ora in poi|ahora|a partir de ahora"
_CORRECTION = re.compile(rf"(?<!\w)(?:{CORRECTION_WORDS})(?!\w)", re.IGNORECASE)
_UPDATE = re.compile(rf"(?<!\w)(?:{UPDATE_WORDS})(?!\w)", re.IGNORECASE)
# A number, a word with digits in it as one value ("Möwe-Hafen-19", "girasole22": a password), or a weekday.
_VALUE = re.compile(
    r"(?<![\w-])[\w-]*\d[\w-]*(?<!-)|(?<!\w)(?:" + "|".join(sorted(WEEKDAY, key=len, reverse=True)) + r")(?!\w)",
    re.IGNORECASE,
)
# "not" right before a value: that value is the one replaced ("the thirteenth, not the twelfth", "no los lunes").
_NEGATED = re.compile(
    r"(?<!\w)(?:not|nicht|no|non|nein)\s+(?:the\s+|am\s+|los\s+|el\s+|il\s+|i\s+|der\s+|um\s+|)$", re.IGNORECASE
)
LOOK_BACK_TURNS = 6  # user turns: a correction refers to what was said shortly before


@dataclass(frozen=True)
class Value:
    text: str
    turn: int  # the turn's number
    start: int

    @property
    def shape(self) -> str:
        """What a correction of this value looks like: as many digits; a small number (an hour, a count); the same
        word around other digits (a password's new number); a weekday."""
        if self.text.isdigit():
            return f"digits{len(self.text)}" if len(self.text) > 2 else "small"
        if self.text.casefold() in WEEKDAY:
            return "weekday"
        return "word:" + re.sub(r"\d+", "#", self.text.casefold())

    @property
    def key(self) -> str:
        if self.text.isdigit():
            return self.text.lstrip("0")
        if self.text.casefold() in WEEKDAY:
            return f"weekday{WEEKDAY[self.text.casefold()]}"
        return self.text.casefold()


def _values(text: str, turn: int) -> list[Value]:
    return [Value(m.group(0), turn, m.start()) for m in _VALUE.finditer(text)]


def _within_turn(text: str, turn: int) -> dict[str, str]:
    """ "V, nein, W" in one turn: V superseded by W (the next value of its shape after a correction word)."""
    superseded: dict[str, str] = {}
    values = _values(text, turn)
    for i, old in enumerate(values):
        later = [v for v in values[i + 1 :] if v.shape == old.shape and v.key != old.key]
        if not later:
            continue
        new = later[0]
        between = text[old.start + len(old.text) : new.start]
        if _NEGATED.search(between):  # "on Fridays, not Mondays": the value after "not" is the old one
            superseded[new.key] = old.text
        elif _CORRECTION.search(between):
            superseded[old.key] = new.text
    return superseded


def superseded_values(turns: list[PromptTurn]) -> dict[str, str]:
    """The values people corrected, each mapped to the value that replaced it (the last correction wins)."""
    users = [turn for turn in turns if turn.role == "user"]
    texts = {turn.number: digits_read(turn.text) for turn in users}
    superseded: dict[str, str] = {}
    for index, turn in enumerate(users):
        text = texts[turn.number]
        superseded.update(_within_turn(text, turn.number))
        strong = bool(_CORRECTION.search(text))
        if not strong and not _UPDATE.search(text):
            continue
        words = content_words(text)
        for new in _values(text, turn.number):
            for back, earlier in enumerate(reversed(users[max(0, index - LOOK_BACK_TURNS) : index])):
                before = texts[earlier.number]
                shared = bool(words & content_words(before))
                # "No, at 11" right after "at 10" corrects it; a small number or a mere "now" needs a shared word.
                related = shared or (back == 0 and strong and new.shape != "small")
                olds = [v for v in _values(before, earlier.number) if v.shape == new.shape and v.key != new.key]
                if related and olds and new.key not in {v.key for v in _values(before, earlier.number)}:
                    superseded[olds[-1].key] = new.text
                    break
    # A chain (4711 -> 4712 -> 4713) ends at its last value.
    for old in list(superseded):
        seen = {old}
        while (key := _key(superseded[old])) in superseded and key not in seen:
            seen.add(key)
            superseded[old] = superseded[key]
    return {old: new for old, new in superseded.items() if old != _key(new)}


def _key(text: str) -> str:
    return Value(text, 0, 0).key


_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def corrected(content: str, superseded: dict[str, str]) -> str:
    """``content`` with every superseded value replaced by its correction; a resolved date that falls on a
    superseded weekday ("Tuesday" then "moved it to Wednesday") becomes the new weekday, which the date rule
    then resolves."""
    if not superseded:
        return content

    def moved(match: re.Match) -> str:
        try:
            weekday = dt.date(*(int(part) for part in match.groups())).weekday()
        except ValueError:  # no such day
            return match.group(0)
        return superseded.get(f"weekday{weekday}", match.group(0))

    content = _ISO.sub(moved, content)

    def replace(match: re.Match) -> str:
        return superseded.get(_key(match.group(0)), match.group(0))

    read = digits_read(content)
    fixed = _VALUE.sub(replace, read)
    return content if fixed == read else fixed
