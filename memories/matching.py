"""Rules on text that decide whether two similar memories may count as the same one."""

import re

_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*")
# Month and weekday names in the household's main languages: "am 3. März" and "am 3. April" differ.
DATE_WORDS = {
    w
    for w in (
        "january february march april may june july august september october november december "
        "monday tuesday wednesday thursday friday saturday sunday "
        "januar jänner februar märz mai juni juli oktober dezember "
        "montag dienstag mittwoch donnerstag freitag samstag sonntag "
        "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre "
        "lunedì martedì mercoledì giovedì venerdì sabato domenica "
        "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre "
        "lunes martes miércoles jueves viernes sábado domingo "
        "janvier février mars avril mai juin juillet août septembre octobre novembre décembre "
        "lundi mardi mercredi jeudi vendredi samedi dimanche"
    ).split()
}
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
