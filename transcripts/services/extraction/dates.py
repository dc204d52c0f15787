"""Relative dates resolved in code: "next Tuesday", "übermorgen", "giovedì della settimana prossima", "a week on
Saturday", "el martes que viene" become YYYY-MM-DD against the conversation's date.

A small model resolves them wrong or not at all; the phrases a household uses are few and their arithmetic is
exact, so they are read here (de, it, en, es) and written into the item in place of the phrase (or of a wrong
date the model wrote). dateparser reads the spans of "in three days" and the like, which the table leaves out.
A weekday phrase means the first such day after the conversation's (the same weekday: a week later); "of next
week" is that day in the following Monday-to-Sunday week; "a week on Saturday" / "Saturday week" a week after
the first Saturday. A habitual weekday ("mittwochs", "every Wednesday", "il mercoledì", "los miércoles") is none.
"""

import datetime as dt
import re
from dataclasses import dataclass

import dateparser

from transcripts.services.extraction.words import digits_read

WEEKDAYS = {
    "de": ("montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag"),
    "en": ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
    "it": ("lunedì", "martedì", "mercoledì", "giovedì", "venerdì", "sabato", "domenica"),
    "es": ("lunes", "martes", "miércoles", "jueves", "viernes", "sábado", "domingo"),
}
_UNACCENTED = {"lunedi": 0, "martedi": 1, "mercoledi": 2, "giovedi": 3, "venerdi": 4, "miercoles": 2, "sabado": 5}
WEEKDAY = {name: index for names in WEEKDAYS.values() for index, name in enumerate(names)} | _UNACCENTED
_DAY = "(?P<day>" + "|".join(sorted(WEEKDAY, key=len, reverse=True)) + ")"
# A preposition before a phrase ("am", "on", "el") stays: only the phrase becomes the date.
# Days from the conversation's: the words a household says (the longest first: "pasado mañana" before "mañana").
OFFSETS = {
    "the day after tomorrow": 2,
    "day after tomorrow": 2,
    "übermorgen": 2,
    "dopodomani": 2,
    "pasado mañana": 2,
    "tomorrow": 1,
    "domani": 1,
    "morgen": 1,
    "mañana": 1,
    "today": 0,
    "heute": 0,
    "oggi": 0,
    "hoy": 0,
}
# "Guten Morgen", "heute Morgen", "am Morgen", "por la mañana", "domani mattina" aside: a morning is no date.
_NOT_A_DAY = r"(?<!guten )(?<!heute )(?<!jeden )(?<!am )(?<!vom )(?<!la )(?<!esta )(?<!cada )"
_OFFSET = re.compile(
    _NOT_A_DAY + r"\b(?P<word>" + "|".join(re.escape(w) for w in sorted(OFFSETS, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
_NEXT_WEEK = (
    r"(?:(?:of |)next week|(?:der |)nächsten woche|nächster woche|nächste woche|della settimana prossima|della prossima settimana"
    r"|(?:la |)settimana prossima|prossima settimana|de la semana que viene|de la próxima semana|de la semana próxima)"
)
_WEEK_AFTER = re.compile(
    rf"\ba week on {_DAY}\b|\b{_DAY.replace('day>', 'day2>')} (?:week|in einer woche|in a week|tra una settimana"
    rf"|fra una settimana|dentro de una semana)\b",
    re.IGNORECASE,
)
_IN_NEXT_WEEK = re.compile(
    rf"\b{_DAY}\s+{_NEXT_WEEK}\b"
    rf"|\b(?:nächste woche|next week)\s+(?:am\s+|on\s+)?{_DAY.replace('day>', 'day2>')}\b",
    re.IGNORECASE,
)
_HABIT = (
    r"(?<!\bil )(?<!\bogni )(?<!\bjeden )(?<!\bevery )(?<!\bother )(?<!\bzweiten )(?<!\blos )(?<!\bcada )(?<!\bi )"
    r"(?<!\bprimer )(?<!\bfirst )(?<!\bersten )(?<!\bprimo )(?<!\blast )(?<!\bletzten )(?<!\bultimo )(?<!\búltimo )"
)
_NEXT_DAY = re.compile(
    r"\b(?:(?:this coming|this|coming|next|diesen|kommenden|nächsten|nächster|próximo|este|questo|"
    r"prossimo)\s+)?" + _HABIT + _DAY + r"(?:\s+(?:que viene|prossimo|próximo))?\b(?!s\b)"
    # a weekday with its day of the month ("Monday the 30th", "domingo 31", "Sonntag, der 6.") is no relative date
    r"(?![,.]?\s+(?:the\s+|der\s+|den\s+|il\s+|el\s+|)\d)",
    re.IGNORECASE,
)
_IN_DAYS = re.compile(
    r"\b(?:in|tra|fra|en|dentro de)\s+(?:\d+|one|two|three|a|zwei|drei|einer|due|tre|dos|tres|una|un)\s+"
    r"(?:days?|weeks?|tagen|tag|wochen|woche|giorni|giorno|settimane|settimana|días|día|semanas|semana)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DateSpan:
    """A relative date phrase in a text and the day it means."""

    start: int
    end: int
    day: dt.date


def _weekday_after(today: dt.date, weekday: int) -> dt.date:
    return today + dt.timedelta(days=(weekday - today.weekday() - 1) % 7 + 1)


def _day_of(match: re.Match) -> int:
    name = next(value for key, value in match.groupdict().items() if key.startswith("day") and value)
    return WEEKDAY[name.casefold()]


def relative_dates(text: str, *, today: dt.date, language: str = "en") -> list[DateSpan]:
    """The relative date phrases of ``text`` with the days they mean, in order, none overlapping."""
    found: list[DateSpan] = []

    def add(match: re.Match, day: dt.date) -> None:
        if all(match.end() <= span.start or match.start() >= span.end for span in found):
            found.append(DateSpan(match.start(), match.end(), day))

    for match in _WEEK_AFTER.finditer(text):
        add(match, _weekday_after(today, _day_of(match)) + dt.timedelta(days=7))
    for match in _IN_NEXT_WEEK.finditer(text):
        monday = today + dt.timedelta(days=7 - today.weekday())
        add(match, monday + dt.timedelta(days=_day_of(match)))
    for match in _NEXT_DAY.finditer(text):
        add(match, _weekday_after(today, _day_of(match)))
    for match in _OFFSET.finditer(text):
        add(match, today + dt.timedelta(days=OFFSETS[match.group("word").casefold()]))
    for match in _IN_DAYS.finditer(text):
        settings = {"RELATIVE_BASE": dt.datetime.combine(today, dt.time()), "PREFER_DATES_FROM": "future"}
        parsed = dateparser.parse(match.group(0), languages=[language], settings=settings)
        if parsed is not None:
            add(match, parsed.date())
    return sorted(found, key=lambda span: span.start)


_ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def dates_resolved(content: str, *, said: str, today: dt.date, language: str) -> str:
    """``content`` with its relative date phrases written as YYYY-MM-DD; a date the model wrote that none of
    ``said``'s phrases means is replaced by the one day ``said`` names (when it names exactly one)."""
    spans = relative_dates(content, today=today, language=language)
    for span in reversed(spans):
        content = content[: span.start] + span.day.isoformat() + content[span.end :]
    said = digits_read(said)
    meant = {span.day.isoformat() for span in relative_dates(said, today=today, language=language)}
    if len(meant) == 1:
        [day] = meant
        # A date whose day of the month a person said ("the thirteenth", "domingo 31") stays; any other is the
        # model's wrong reading of the one phrase.
        told = {int(n) for n in re.findall(r"\d+", said)}
        content = _ISO.sub(lambda m: m.group(0) if int(m.group(0)[-2:]) in told else day, content)
    return content
