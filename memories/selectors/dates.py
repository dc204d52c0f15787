"""Dates a question names ("im Mai", "letzte Woche", "in July 2023", "ieri") as spans of ``valid_at``.

dateparser finds and reads them: it knows the month and weekday names and the relative phrases
("yesterday", "vor zwei Wochen", "la settimana scorsa") of some 200 locales, is maintained, and
tells how precise a date is (day, week, month or year), which is what turns a date into a span.
It costs 0.2-2 ms a question once its language data is loaded (the first call of a process loads
it, ~40 ms); questions without a digit or a date word do not reach it.
"""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from django.db.models import Q
from django.utils import timezone

from memories.matching import DATE_WORDS

# Words that can start a relative date in the household's main languages. Only a question with one
# of these, a month or weekday name or a digit is handed to dateparser (most questions name no date).
RELATIVE_WORDS = frozenset(
    """
    yesterday today tomorrow last ago week weeks month months year years weekend
    gestern vorgestern heute morgen letzte letzten letztes letzter vergangene vergangenen vor woche wochen
    monat monaten jahr jahren wochenende
    ieri oggi domani scorsa scorso fa settimana settimane mese mesi anno anni
    ayer hoy mañana pasada pasado hace semana semanas mes meses año años
    hier aujourd'hui demain dernière dernier il semaine semaines mois an ans année
    """.split()
)
_WORD = re.compile(r"\w+", re.UNICODE)
_YEAR = re.compile(r"\b(19|20)\d\d\b")
_DIGIT = re.compile(r"\d")
# dateparser's languages are ISO 639-1 codes too; it refuses codes it does not know.
PARSER_LANGUAGES = ("de", "en", "it", "es", "fr")


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


def may_name_a_date(query: str) -> bool:
    """Cheap test: a digit, a month or weekday name or a relative date word."""
    if _DIGIT.search(query):
        return True
    words = {w.lower() for w in _WORD.findall(query)}
    return bool(words & DATE_WORDS or words & RELATIVE_WORDS)


@lru_cache(maxsize=16)
def _parser(languages: tuple[str, ...]):
    from dateparser.date import DateDataParser

    return DateDataParser(languages=list(languages), settings={"PREFER_DATES_FROM": "past"})


def _parser_languages(languages) -> tuple[str, ...]:
    """The main languages in a fixed order (one parser for all questions), and the question's if dateparser knows it."""
    from dateparser.languages.loader import LocaleDataLoader

    known = LocaleDataLoader().get_locale_map(languages=None)
    return (*PARSER_LANGUAGES, *sorted(code for code in set(languages) - set(PARSER_LANGUAGES) if code in known))


def question_dates(*, query: str, languages, now: datetime | None = None) -> list[DateSpan]:
    """The spans of the dates the question names, in the question's and the household's main languages.

    A bare number other than a year ("18th", "4711") is no date. A month or day without a year
    means that month or day in any year; relative dates count from ``now``.
    """
    if not may_name_a_date(query):
        return []
    from dateparser.search import search_dates

    now = timezone.localtime(now or timezone.now())
    codes = _parser_languages(languages)
    settings = {"PREFER_DATES_FROM": "past", "RELATIVE_BASE": now.replace(tzinfo=None)}
    found = search_dates(query, languages=list(codes), settings=settings) or []
    spans = []
    for text, _ in found:
        words = {w.lower() for w in _WORD.findall(text)}
        named = bool(words & DATE_WORDS)
        year = bool(_YEAR.search(text))
        relative = bool(words & RELATIVE_WORDS)
        if not (named or year or relative):
            continue  # a bare number or ordinal
        data = _parser(codes).get_date_data(text, date_formats=None)
        if data.date_obj is None:
            continue
        spans.append(_span(data.date_obj, data.period or "day", text=text, every_year=named and not year))
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
