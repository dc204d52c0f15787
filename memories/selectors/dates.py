"""Dates a question names ("im Mai", "letzte Woche", "in July 2023", "ieri") as spans of ``valid_at``.

dateparser finds and reads them: it knows the month and weekday names and the relative phrases
("yesterday", "vor zwei Wochen", "la settimana scorsa") of some 200 locales, is maintained, and
tells how precise a date is (day, week, month or year), which is what turns a date into a span.
Its search costs 2-6 ms a question, so only questions with a month or weekday name or a relative
date phrase reach it; a bare year ("1990") is read without it, and most questions name no date.
"""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from django.db.models import Q
from django.utils import timezone

from memories.limits import DATE_SEARCH_CHARS
from memories.matching import DATE_WORDS

# Words that make a relative date on their own ("gestern", "last week", "la settimana scorsa") ...
RELATIVE_MARKERS = frozenset(
    """
    yesterday today last
    gestern vorgestern heute letzte letzten letztes letzter vergangene vergangenen vergangenes
    ieri oggi scorsa scorso scorsi scorse
    ayer hoy pasada pasado
    hier dernière dernier dernières derniers passée passé
    """.split()
)
# ... and words that do only beside a unit of time ("vor drei Tagen", "two weeks ago", "tre giorni fa").
RELATIVE_BESIDE_UNIT = frozenset("vor ago fa hace il".split())
TIME_UNITS = frozenset(
    """
    day days week weeks month months year years weekend
    tag tage tagen woche wochen monat monate monaten jahr jahre jahren wochenende
    giorno giorni settimana settimane mese mesi anno anni
    día días dia dias semana semanas mes meses año años
    jour jours semaine semaines mois an ans année années
    """.split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
_YEAR = re.compile(r"\b(19|20)\d\d\b")


@dataclass(frozen=True)
class DateSpan:
    """[start, end) of valid_at; with ``every_year`` the same month (and day) in any year ("im Mai")."""

    start: datetime
    end: datetime
    every_year: bool = False
    text: str = ""  # the words of the question that name it
    precision: str = "day"  # day, week, month or year

    def condition(self) -> Q:
        if not self.every_year:
            return Q(valid_at__gte=self.start, valid_at__lt=self.end)
        if self.precision == "day":
            return Q(valid_at__month=self.start.month, valid_at__day=self.start.day)
        return Q(valid_at__month=self.start.month)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def needs_parser(words: set[str]) -> bool:
    """A month or weekday name, or a relative date phrase: what only dateparser can read."""
    return bool(words & DATE_WORDS or words & RELATIVE_MARKERS or (words & RELATIVE_BESIDE_UNIT and words & TIME_UNITS))


@lru_cache(maxsize=16)
def _parser(languages: tuple[str, ...]):
    from dateparser.date import DateDataParser

    return DateDataParser(languages=list(languages), settings={"PREFER_DATES_FROM": "past"})


@lru_cache(maxsize=1)
def _known_languages() -> frozenset[str]:
    from dateparser.languages.loader import LocaleDataLoader

    return frozenset(LocaleDataLoader().get_locale_map(languages=None))


def question_dates(*, query: str, languages, now: datetime | None = None) -> list[DateSpan]:
    """The spans of the dates the question names, read in ``languages`` (the query's and the household's).

    A bare number other than a year ("18th", "4711") is no date. A month or day without a year
    means that month or day in any year; relative dates count from ``now``.
    """
    query = query[:DATE_SEARCH_CHARS]  # dateparser's search costs ~2 s per 1,000 characters
    words = _words(query)
    now = timezone.localtime(now or timezone.now())
    if not needs_parser(words):
        return [
            _span(datetime(int(y.group()), 1, 1), "year", text=y.group(), every_year=False)
            for y in _YEAR.finditer(query)
        ]
    from dateparser.search import search_dates

    codes = tuple(sorted(code for code in set(languages) if code in _known_languages())) or ("en",)
    settings = {"PREFER_DATES_FROM": "past", "RELATIVE_BASE": now.replace(tzinfo=None)}
    found = search_dates(query, languages=list(codes), settings=settings) or []
    spans = []
    for text, moment in found:
        text_words = _words(text)
        named = bool(text_words & DATE_WORDS)
        year = bool(_YEAR.search(text))
        if not (named or year or needs_parser(text_words) or text_words & TIME_UNITS):
            continue  # a bare number or ordinal
        # The period (day, week, month, year) from a second reading; the date from the search, which
        # counts from ``now`` (the cached parser counts relative dates from the wall clock).
        data = _parser(codes).get_date_data(text)
        if data.date_obj is None:
            continue
        spans.append(_span(moment, data.period or "day", text=text, every_year=named and not year))
    return spans


def _span(moment: datetime, precision: str, *, text: str, every_year: bool) -> DateSpan:
    day = timezone.make_aware(datetime(moment.year, moment.month, moment.day)) if timezone.is_naive(moment) else moment
    day = day.replace(hour=0, minute=0, second=0, microsecond=0)
    if precision == "year":
        start = day.replace(month=1, day=1)
        end = start.replace(year=start.year + 1)
    elif precision == "month":
        start = day.replace(day=1)
        end = (start + timedelta(days=32)).replace(day=1)
    elif precision == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(days=7)
    else:
        precision, start, end = "day", day, day + timedelta(days=1)
    return DateSpan(start=start, end=end, every_year=every_year, text=text, precision=precision)


def dates_condition(spans: list[DateSpan]) -> Q:
    """valid_at in any of the spans."""
    condition = Q(pk__in=[])
    for span in spans:
        condition |= span.condition()
    return condition
