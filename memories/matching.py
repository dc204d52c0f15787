"""Rules on text that decide whether two similar memories may count as the same one."""

import re

_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
# Month names in the household's main languages, January first: "am 3. März" and "am 3. April" differ, and
# "14 marzo", "14. März", "March 14" and "14 de marzo" are one date (memories.digests reads them).
_MONTH_NAMES = (
    "january february march april may june july august september october november december",
    "januar februar märz april mai juni juli august september oktober november dezember",
    "jänner",  # Austrian January (the first name of its line)
    "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre",
    "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
    "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
)
MONTHS = {name: number for names in _MONTH_NAMES for number, name in enumerate(names.split(), start=1)}
# A month name in a regular expression (longest first: "märz" before "mar…"; match case-insensitively).
MONTH_PATTERN = "|".join(sorted(map(re.escape, MONTHS), key=len, reverse=True))
# Abbreviated month names, a month only beside a day ("Aug 17", "17. Okt.", "17 ago"): alone, "mar" and "ago" are
# words ("set", Italian for September, is left out: "set 3" is a tennis score).
_MONTH_ABBREVIATIONS = (
    "jan feb mar apr - jun jul aug sep oct nov dec",
    "- - mär apr - - - - - okt - dez",
    "gen - - - mag giu lug ago sett ott - dic",
    "ene - - abr - - - - - - - -",
    "- - mrz - - - - - sept - - -",
)
MONTH_ABBREVIATIONS = {
    name: number for names in _MONTH_ABBREVIATIONS for number, name in enumerate(names.split(), start=1) if name != "-"
}
# A month beside a day: its name or an abbreviation, and the pattern of either (longest first).
DAY_MONTHS = {**MONTHS, **MONTH_ABBREVIATIONS}
DAY_MONTH_PATTERN = "|".join(sorted(map(re.escape, DAY_MONTHS), key=len, reverse=True))
WEEKDAYS = frozenset(
    (
        "monday tuesday wednesday thursday friday saturday sunday "
        "montag dienstag mittwoch donnerstag freitag samstag sonntag "
        "lunedì martedì mercoledì giovedì venerdì sabato domenica "
        "lunes martes miércoles jueves viernes sábado domingo "
        "lundi mardi mercredi jeudi vendredi samedi dimanche"
    ).split()
)
# Month and weekday names: "am 3. März" and "am 3. April" differ.
DATE_WORDS = frozenset(MONTHS) | WEEKDAYS
_WORD = re.compile(r"\w+", re.UNICODE)


def numbers_and_dates(text: str) -> frozenset[str]:
    """The numbers (separators removed) and month/weekday names in a text."""
    lowered = text.lower()
    numbers = {re.sub(r"[.,:/-]", "", n).lstrip("0") or "0" for n in _NUMBER.findall(lowered)}
    words = {w for w in _WORD.findall(lowered) if w in DATE_WORDS}
    return frozenset(numbers | words)


def may_be_duplicates(a: str, b: str) -> bool:
    """False when the texts carry different numbers or dates: those are never duplicates."""
    return numbers_and_dates(a) == numbers_and_dates(b)
