"""Words as grounding reads them: numbers said in words as digits, and a text's content words."""

import functools
import re

from text_to_num import alpha2digit

LANGUAGES = ("de", "it", "es", "en")  # text2num reads these (and fr, pt, nl, da); a turn's language is not known
_DIGITS = re.compile(r"\d+")
_SPOKEN_CODE = re.compile(r"(?<!\d )(?<!\d)\b\d(?: \d){2,}\b")
_WORD = re.compile(r"\w{4,}")
# Words too common to say that two turns speak of the same thing.
_COMMON = frozenset(
    "aber also auch dann dass dein deine denn doch eine einen einer haben habe heute ich immer jetzt kann mein meine "
    "mehr nicht noch nur oder schon sein sind über und wenn wird wieder wir euch bitte danke genau stimmt "
    "about also been from have just like that then there they this what when will with would your yours sure okay "
    "thanks please really right "
    "anche come della delle degli allora ancora perché però sono stato stata questo questa quello quella grazie "
    "bene allora sempre molto "
    "pero porque como esta este esto para sobre tiene tengo gracias bueno ahora entonces siempre mucho muy".split()
)


@functools.lru_cache(maxsize=1024)
def digits_read(text: str) -> str:
    """``text`` with numbers said in words written as digits ("otto" 8, "siete" 7, "vierzehn" 14), in each language
    text2num reads; isolated articles ("una", "one") stay words."""
    for language in LANGUAGES:
        text = alpha2digit(text, language, threshold=1)  # "one" stays a word: it is also an article
    # A code said digit by digit ("vier sieben eins eins") is one number.
    return _SPOKEN_CODE.sub(lambda m: m.group(0).replace(" ", ""), text)


def content_words(text: str) -> set[str]:
    """The words of four letters or more that say what a text is about (common words aside)."""
    return {word for word in _WORD.findall(text.casefold()) if word not in _COMMON and not word.isdigit()}


def text_values(text: str) -> set[str]:
    """The numbers of a text (digit runs, without leading zeros; a run of zeros is none)."""
    return {run.lstrip("0") for run in _DIGITS.findall(text) if run.strip("0")}
