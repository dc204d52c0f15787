"""Keyed digests of a text's distinctive tokens: what lets a forget block recognise a forgotten value.

A tombstone keeps no text. Besides its vector it keeps HMAC-SHA256 digests of the forgotten memory's
distinctive tokens (numbers, codes, dates and words rare in every household language, such as a
password), so that "Zebra: 98765" is recognised as carrying the value of a forgotten
"Zebra-Passwort 98765 quokka" even where the meanings are far apart.

Tokens are normalised before hashing: case-folded, separators inside a number or code removed
("12-34" = "1234", "4.711" = "4711"), dates written as year, month, day ("12.03.2024" = "2024-03-12" =
"12 de marzo de 2024") and as the day in any year ("14/03" = "14 marzo" = "14. März" = "March 14"; the
month names of memories.matching.MONTHS). A month named alone ("due in June") is a value of the forgotten
memory that no text is blocked for sharing. Numbers need three digits; a bare year (1900-2099) is no
token: it says when, not what. Rare means absent from wordfreq's small word lists of the household
languages (Zipf frequency < 3, rarer than once per million words in each): "quokka", "Metformin",
"Kellertür"; not "Zebra" or "Garage". Rare words are weak tokens: compounds such as "Gartentor" are rare too.

A location or a name has no such token ("Il passaporto di Marco è nel cassetto sotto il forno"), and
a fragment of it ("Passaporto di Marco: cassetto sotto il forno") sits just under the meaning
threshold. So a tombstone also keeps **word marks**: 12 bits of the HMAC of each content word (no
function word). A text made of the forgotten memory's own words (most of its content words are
among the marks) is a fragment of it. Twelve bits identify no word: each mark stands for one in 4,096
of all words, so even with the key a mark narrows a word down to dozens of candidates per language.

A forgotten **whole value** (a password or code that mixes letters and digits, "Sonnenblume-8812",
"Kestrel!4491"; a word and a number said together, "Zebra 98765"; a long number) is also kept, as a
digest of its letters and digits only, and is matched in the text as a reader sees it: percent- and
JSON-escapes decoded, NFKC, case-folded, split on the separators of URLs, query strings, fragments,
JSON and key=value ("?psk=Sonnenblume%2D8812", ``{"psk": "SONNENBLUME_8812"}``, full-width letters).
Such a value is the secret in any language and wording; its parts alone are not ("Bus 8812").

A short number is the same digits as a bus line, so it ties a text to a forgotten memory only beside what it is
about: a tombstone keeps **key marks**, the word marks of the forgotten memory's key words (three letters and up,
"PIN", "Haustür"; no function word, month, letters of a value or name of the household), and a text that carries
one of its numbers or codes and one of its key words ("pin=6093", "die Haustür geht mit 6093 auf") is the
forgotten value where it stands. Kept turns are looked up by **value keys**, the first 64 bits of each digest
(``token_keys``), so a forget reads only the turns that hold one of the forgotten values.

The key is kept outside the database (``FORGET_DIGEST_KEY`` from the environment, else a key generated
once into the data folder), so the database alone does not let anyone test guesses against a digest.
"""

import hashlib
import hmac
import math
import re
import secrets
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote

from django.conf import settings

from memories.matching import DATE_WORDS, DAY_MONTH_PATTERN, DAY_MONTHS, MONTHS

# The languages whose common words are not distinctive (wordfreq's small lists cover them all).
FREQUENCY_LANGUAGES = ("de", "en", "it", "es", "fr")
# Zipf 3 = once per million words: wordfreq's small lists stop there, so "rare" is "not in any of them".
RARE_ZIPF = 3.0
MIN_WORD_CHARS = 4
MIN_NUMBER_DIGITS = 3
MIN_CODE_CHARS = 4
FRAGMENT_CHUNKS = 3
# A content word: four letters or more, not among the commonest words of any household language
# (Zipf >= 5.5: "sotto", "unter", "under", "jeden"); names, objects and places are content words.
FUNCTION_ZIPF = 5.5
MARK_BITS = 12
# "Made of the forgotten memory's words": at least two of them, and three in four of the text's own.
MIN_SHARED_WORDS = 2
SHARED_WORDS = 0.75
# A text that carries a forgotten value is blocked from the low ``digest_related`` similarity on when none of its
# key words is new to the tombstone ("Das Passwort ist 98765"), from halfway between ``digest_related`` and
# ``digest_weak`` when at most this many are ("carta finale 38 29", "Das Tor geht mit 4711 auf" at 0.53 blocked;
# "Il treno 5150 parte alle sette" at 0.37 kept), while the same number in a fact of its own brings more words of
# its own ("El pedido 2580 de la farmacia llega mañana") and needs ``digest_weak`` (bench/forget.py --part blocks).
VALUE_NEW_WORDS = 1
KEY_FILE = "forget_digest_key"

# A chunk: word characters joined by separators that occur inside numbers, codes and compounds.
# Not apostrophes: "dell'armadio" is two words, not the rare "dellarmadio".
_CHUNK = re.compile(r"[^\W_]+(?:[-./:,][^\W_]+)*")
_PARTS = re.compile(r"[^\W_]+")
_DIGITS_OR_LETTERS = re.compile(r"\d+|[^\W\d_]+")
_LETTERS = re.compile(r"[^\W\d_]+")
_ORDINAL = re.compile(r"^\d+(st|nd|rd|th|er|e|te|ten|o|a|º|ª)$")
_DAY_FIRST = re.compile(r"^(\d{1,2})[./-](\d{1,2})[./-](\d{4})$")
_YEAR_FIRST = re.compile(r"^(\d{4})[./-](\d{1,2})[./-](\d{1,2})$")
# A day and month without a year: "14/03", or "14.03" with two digits each (a price "1.5" is no date).
_DAY_MONTH = re.compile(r"^(\d{1,2})/(\d{1,2})$|^(\d{2})\.(\d{2})$")
# A date with a month name (memories.matching.MONTHS) or its abbreviation beside the day: "14 marzo", "14. März",
# "14th of March", "14 de marzo de 2025", "March 14", "March 14th, 2025", "Aug 17", "17. Okt.". Read case-insensitively, in the text as said (digest_spans) or normalised.
_MONTH_DATE = re.compile(
    rf"\b(?:(?P<day>\d{{1,2}})(?:\.|st|nd|rd|th|º|ª|°|er)?\s*(?:de\s+|of\s+(?:the\s+)?)?(?P<month>{DAY_MONTH_PATTERN})"
    rf"|(?P<month_first>{DAY_MONTH_PATTERN})\.?\s+(?:the\s+)?(?P<day_after>\d{{1,2}})(?:st|nd|rd|th)?)\b"
    r"(?:,?\s*(?:de\s+)?(?P<year>\d{4})\b)?",
    re.IGNORECASE,
)
# A month named alone ("due in June") is a value of a forgotten memory that no text is blocked for sharing (a
# birthday in June is not a pregnancy due in June); "may" is mostly a verb.
MONTH_ALONE_PREFIX = "~"
_NOT_A_MONTH_ALONE = frozenset({"may"})


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _day_month(day: int, month: int, year: str | None = None) -> frozenset[str]:
    """A date's values: "--mmdd" (the day in any year: "14 marzo" is "14/03"), with a year also yyyymmdd."""
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return frozenset()
    any_year = f"--{month:02d}{day:02d}"
    return frozenset({any_year, f"{year}{month:02d}{day:02d}"} if year else {any_year})


def _dates(chunk: str) -> frozenset[str]:
    """A numeric date's values (day first, as written in de/it/es/en-GB): see ``_day_month``."""
    if match := _DAY_FIRST.match(chunk):
        day, month, year = match.groups()
    elif match := _YEAR_FIRST.match(chunk):
        year, month, day = match.groups()
    elif match := _DAY_MONTH.match(chunk):
        day, month = match[1] or match[3], match[2] or match[4]
        year = None
    else:
        return frozenset()
    return _day_month(int(day), int(month), year)


def named_dates(text: str) -> list[tuple[int, int, frozenset[str]]]:
    """The dates ``text`` writes with a month name: ``(start, end, values)`` ("14 marzo" -> {"--0314"})."""
    found = []
    for match in _MONTH_DATE.finditer(text):
        month = DAY_MONTHS[_normalise(match["month"] or match["month_first"])]
        day = int(match["day"] or match["day_after"])
        if values := _day_month(day, month, match["year"]):
            found.append((*match.span(), values))
    return found


# The words whose answers the table gives are those wordfreq's regex tokenizer keeps as one token,
# unchanged, in each household language: runs of lower-case Latin letters that NFC and case folding
# leave as they are ("kellertür", "mañana", "garçon"; "ß" is folded to "ss" before it gets here).
# Any other word (combining marks, Greek, Cyrillic, CJK) asks wordfreq itself, as before.
_TABLE_CHARS = "".join(
    c
    for c in map(chr, range(0x61, 0x250))
    if unicodedata.name(c, "").startswith("LATIN SMALL LETTER ")
    and c.casefold() == c
    and unicodedata.normalize("NFC", c) == c
)
_TABLE_WORD = re.compile(f"[{re.escape(_TABLE_CHARS)}]+")


def _zipf(freq: float) -> float:
    """wordfreq's ``zipf_frequency`` of a one-token word with this list frequency (its steps, in its order)."""
    from wordfreq import freq_to_zipf, zipf_to_freq

    freq = max(1.0 / (1.0 / freq), zipf_to_freq(0.0))
    return round(freq_to_zipf(round(freq, math.floor(-math.log(freq, 10)) + 3)), 2)


@lru_cache(maxsize=1)
def _zipf_table() -> dict[str, float]:
    """Each word of wordfreq's small lists of the household languages -> its highest Zipf frequency among them."""
    from wordfreq import get_frequency_dict  # loads its lists on first use (~0.1 s)

    table: dict[str, float] = {}
    for language in FREQUENCY_LANGUAGES:
        zipfs: dict[float, float] = {}  # a list has a few hundred distinct frequencies
        for word, freq in get_frequency_dict(language, wordlist="small").items():
            if (zipf := zipfs.get(freq)) is None:
                zipf = zipfs[freq] = _zipf(freq)
            if zipf > table.get(word, 0.0):
                table[word] = zipf
    return table


def _max_zipf(word: str) -> float:
    """The highest Zipf frequency of ``word`` among the household languages' small lists (0: in none)."""
    if _TABLE_WORD.fullmatch(word):
        return _zipf_table().get(word, 0.0)
    from wordfreq import zipf_frequency

    return max(zipf_frequency(word, language, wordlist="small") for language in FREQUENCY_LANGUAGES)


@lru_cache(maxsize=65536)
def is_rare_word(word: str) -> bool:
    """True when ``word`` is in none of wordfreq's small lists of the household languages."""
    return _max_zipf(word) < RARE_ZIPF


@lru_cache(maxsize=65536)
def is_function_word(word: str) -> bool:
    """True for a word among the commonest of any household language ("sotto", "unter", "about")."""
    return _max_zipf(word) >= FUNCTION_ZIPF


def content_words(text: str) -> frozenset[str]:
    """The normalised words of ``text`` that say what it is about: four letters or more, no function word."""
    return frozenset(
        word
        for word in _LETTERS.findall(_normalise(text))
        if len(word) >= MIN_WORD_CHARS and not is_function_word(word)
    )


def _is_year(number: str) -> bool:
    """A bare year says when, not what: "2024" would tie every sentence of that year to a forgotten one."""
    return len(number) == 4 and 1900 <= int(number) <= 2099


@dataclass(frozen=True)
class Tokens:
    """A text's distinctive tokens: ``values`` (numbers, codes, dates) say more than ``weak`` ones (rare words).

    ``fragment``: the text is at most FRAGMENT_CHUNKS words, numbers or codes ("Zebra: 98765",
    "kestrel4491"): a forgotten token in it is most of what it says, and its similarity to any
    sentence is low because it is short, not because it means something else.
    """

    values: frozenset[str]
    weak: frozenset[str]
    fragment: bool = False
    dates: frozenset[str] = frozenset()  # the values that are dates
    months: frozenset[str] = frozenset()  # months named alone: a forgotten memory's, never shared (MONTH_ALONE_PREFIX)

    @property
    def all(self) -> frozenset[str]:
        return self.values | self.weak | self.months

    @property
    def numbers(self) -> frozenset[str]:
        """The numbers and codes: the values a key word beside them ties to a forgotten memory (not dates)."""
        return self.values - self.dates


def distinctive_tokens(text: str) -> Tokens:
    """The normalised numbers (bare years left out), codes and dates (numeric or with a month name) of ``text``,
    its rare words, and the months it names alone."""
    values: set[str] = set()
    weak: set[str] = set()
    dates: set[str] = set()
    months: set[str] = set()
    digit_run: list[str] = []  # adjacent all-digit chunks ("1234 5678"): also kept joined

    def number(digits: str) -> None:
        if len(digits) >= MIN_NUMBER_DIGITS:
            if not _is_year(digits):
                values.add(digits)

    def word(candidate: str) -> None:
        if len(candidate) >= MIN_WORD_CHARS and candidate.isalpha() and is_rare_word(candidate):
            weak.add(candidate)

    def close_run() -> None:
        if len(digit_run) > 1:
            values.add("".join(digit_run))
        digit_run.clear()

    chunks: list[str] = []
    normalised = _normalise(text)
    matches = list(_CHUNK.finditer(normalised))
    for match in matches:
        chunk = match.group()
        parts = _PARTS.findall(chunk)
        # "zebra-98765" is a word and a number; "a3-f9", "12-34" and "12.03.2024" are one code each.
        if any(c.isdigit() for c in chunk) and any(p.isalpha() and len(p) > 2 for p in parts):
            chunks.extend(parts)
        else:
            chunks.append(chunk)
    for chunk in chunks:
        parts = _PARTS.findall(chunk)
        joined = "".join(parts)
        if not any(c.isdigit() for c in joined):
            close_run()
            for candidate in {*parts, joined}:
                word(candidate)
            if joined in MONTHS and joined not in _NOT_A_MONTH_ALONE:
                months.add(f"{MONTH_ALONE_PREFIX}{MONTHS[joined]:02d}")
            continue
        if not joined.isdigit():
            close_run()
        if found := _dates(chunk):
            dates.update(found)
            if len(found) > 1:
                continue  # a date with its year is no number ("12.03.2024"); "14/03" is also 1403, as before
        if joined.isdigit():
            digit_run.append(joined)
            number(joined)
        elif not _ORDINAL.match(joined) and (
            sum(c.isdigit() for c in joined) >= MIN_NUMBER_DIGITS or len(joined) >= MIN_CODE_CHARS
        ):
            values.add(joined)
            # "kestrel4491" also carries "4491" and "kestrel", written apart elsewhere.
            for run in _DIGITS_OR_LETTERS.findall(joined):
                number(run) if run.isdigit() else word(run)
    close_run()
    for _, _, found in named_dates(normalised):
        dates.update(found)
    values.update(dates)
    return Tokens(
        values=frozenset(values),
        weak=frozenset(weak - values),
        fragment=len(matches) <= FRAGMENT_CHUNKS,
        dates=frozenset(dates),
        months=frozenset(months),
    )


# A whole value: letters and digits together (at least this many of each: "sonnenblume8812", "kestrel4491";
# not "500mg" or "az12"), or a number of at least WHOLE_NUMBER_DIGITS digits (a phone or card number; a date
# or an order number is shorter), or a content word followed, after spaces only, by a number ("Zebra 98765",
# "Sonnenblume 8812": a password written apart; not "8812 fährt", not a key and its value, "linie": 8812).
# Its digest is of its letters and digits only, prefixed so that it never equals a token's.
WHOLE_MIN_LETTERS = 3
WHOLE_MIN_DIGITS = 3
WHOLE_NUMBER_DIGITS = 9
WHOLE_PREFIX = "="
# What separates values as a reader sees them: spaces and the separators of URLs (/ ? # & = ;), JSON
# (" ' { } [ ] , :), key=value and prose brackets. Not "-", "_", ".", "!", "+" or "%": they occur inside a
# password ("Sonnenblume-8812", "Kestrel!4491") or an escape, which is decoded first.
_SEPARATOR_CHARS = r"\s/?#&=;\"'`{}\[\],:()<>|\\*"
_READER_SEGMENT = re.compile(rf"(?:%[0-9A-Fa-f]{{2}}|\\u[0-9A-Fa-f]{{4}}|[^{_SEPARATOR_CHARS}])+")
_READER_SPLIT = re.compile(rf"[{_SEPARATOR_CHARS}]+")
_JSON_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})")
_SPAN_TAIL = ".!?…"  # sentence punctuation after a value stays out of its span
_NOT_ALNUM = re.compile(r"[\W_]+")
_DIGIT = re.compile(r"\d")


def _decoded(segment: str) -> str:
    """A segment as a reader sees it: JSON and percent escapes decoded (twice, for a URL inside a URL), NFKC, case-folded."""
    if "%" not in segment and "\\" not in segment:
        return _normalise(segment)
    text = _JSON_ESCAPE.sub(lambda m: chr(int(m[1], 16)), segment)
    for _ in range(2):
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return _normalise(text)


def _alnum(piece: str) -> str:
    return _NOT_ALNUM.sub("", piece)


def _is_whole(form: str) -> bool:
    if form.isdigit():
        return len(form) >= WHOLE_NUMBER_DIGITS
    digits = len(_DIGIT.findall(form))
    return digits >= WHOLE_MIN_DIGITS and len(form) - digits >= WHOLE_MIN_LETTERS


def _is_number(form: str) -> bool:
    return form.isdigit() and len(form) >= MIN_NUMBER_DIGITS and not _is_year(form)


def _is_name_word(form: str) -> bool:
    return form.isalpha() and len(form) >= MIN_WORD_CHARS and not is_function_word(form)


@lru_cache(maxsize=1024)  # a turn is read twice by redaction (its digests, then its spans)
def whole_values(text: str) -> tuple[tuple[int, int, str], ...]:
    """The whole values ``text`` carries as a reader sees it: ``(start, end, value)``, where start and end are
    the span in ``text`` that says it (an escaped segment as a whole) and value is WHOLE_PREFIX + its letters
    and digits ("=sonnenblume8812" for "psk=Sonnenblume%2D8812" and "SONNENBLUME 8812" alike)."""
    if len(_DIGIT.findall(text)) < WHOLE_MIN_DIGITS:
        return ()  # every whole value has three digits or more (an escape's hex digits count: a cheap bound)
    # (start, end, letters and digits, whether only spaces separate it from the next piece)
    pieces: list[tuple[int, int, str, bool]] = []
    matches = list(_READER_SEGMENT.finditer(text))
    # A segment without a digit decodes to none (the escapes of digits hold digits): it matters only as the
    # word before a number; any other is a gap, read no further.
    digits = [_DIGIT.search(match.group()) is not None for match in matches] + [False]
    for n, match in enumerate(matches):
        start, end = match.span()
        if not (digits[n] or digits[n + 1]):
            pieces.append((start, end, "", False))
            continue
        while end > start and text[end - 1] in _SPAN_TAIL:
            end -= 1
        decoded = _decoded(match.group())
        parts = _READER_SPLIT.split(decoded)
        gaps = [gap.isspace() for gap in _READER_SPLIT.findall(decoded)]
        after = n + 1 < len(matches) and text[match.end() : matches[n + 1].start()].isspace()
        for part, spaced in zip(parts, [*gaps, after], strict=True):
            if form := _alnum(part):
                pieces.append((start, end, form, spaced))
            elif pieces and not spaced:
                pieces[-1] = (*pieces[-1][:3], False)
    found: list[tuple[int, int, str]] = []
    for i, (start, end, form, spaced) in enumerate(pieces):
        if _is_whole(form):
            found.append((start, end, WHOLE_PREFIX + form))
        if spaced and i + 1 < len(pieces):
            _, next_end, following, _ = pieces[i + 1]
            if _is_number(following) and _is_name_word(form):
                found.append((start, next_end, WHOLE_PREFIX + form + following))
    return tuple(found)


def digest_key() -> bytes:
    """The HMAC key: ``FORGET_DIGEST_KEY``, else the key generated once into the data folder."""
    if configured := getattr(settings, "FORGET_DIGEST_KEY", ""):
        return configured.encode()
    # By the folder's name: a Path built on every call cost more than the HMACs of a short text.
    return _file_key(str(settings.DATA_DIR))


@lru_cache(maxsize=4)
def _file_key(data_dir: str) -> bytes:
    path = Path(data_dir) / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # Exclusive create: two processes starting at once keep the first one's key.
        try:
            with open(path, "x") as handle:
                handle.write(secrets.token_urlsafe(48))
            path.chmod(0o600)
        except FileExistsError:
            pass
    return path.read_text().strip().encode()


def _digests(tokens, key: bytes) -> list[str]:
    return sorted(_digest(token, key) for token in tokens)


# An index key: the first 64 bits of a digest as PostgreSQL's bigint. Which kept turns hold a forgotten value is
# looked up by these keys (transcripts' ``Turn.token_keys``, a GIN index); the text decides after.
KEY_HEX = 16
_SIGNED = 1 << 63


def digest_keys(digests) -> list[int]:
    """The index keys of these digests (``token_digests``), sorted and distinct."""
    return sorted({int(digest[:KEY_HEX], 16) - _SIGNED for digest in digests})


@lru_cache(maxsize=65536)
def _digest(token: str, key: bytes) -> str:
    # Keying many turns (turns_append, the migration that keys the kept ones) meets the same words again and again.
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()


def token_digests(text: str) -> list[str]:
    """HMAC-SHA256 (hex) of each distinctive token and whole value of ``text``, sorted: what a tombstone keeps."""
    return _digests(distinctive_tokens(text).all | {value for _, _, value in whole_values(text)}, digest_key())


def token_keys(text: str) -> list[int]:
    """The index keys (``digest_keys``) of ``text``'s ``token_digests``: what a kept turn is looked up by."""
    return digest_keys(token_digests(text))


def digest_spans(text: str) -> list[tuple[int, int, frozenset[str]]]:
    """Where ``text`` carries distinctive tokens: ``(start, end, digests)`` per chunk that has any ("Sonnenblume-8812",
    "12.03.2024", "quokka"), per run of adjacent numbers ("1234 5678") as one span (tokens as ``distinctive_tokens``),
    and per whole value as a reader sees it (``whole_values``: "Sonnenblume%2D8812" in a URL)."""
    key = digest_key()
    spans: list[tuple[int, int, frozenset[str]]] = []
    run: list[tuple[int, int]] = []

    def add(start: int, end: int) -> None:
        if digests := _chunk_digests(text[start:end], key):
            spans.append((start, end, digests))

    def close_run() -> None:
        if len(run) > 1:
            add(run[0][0], run[-1][1])
        run.clear()

    for match in _CHUNK.finditer(text):
        add(*match.span())
        if "".join(_PARTS.findall(match.group())).isdigit():
            run.append(match.span())
        else:
            close_run()
    close_run()
    spans.extend((start, end, frozenset({_digest(value, key)})) for start, end, value in whole_values(text))
    spans.extend((start, end, frozenset(_digests(values, key))) for start, end, values in named_dates(text))
    return spans


@lru_cache(maxsize=65536)
def _chunk_digests(chunk: str, key: bytes) -> frozenset[str]:
    # Words repeat across the turns a forget reads: each chunk is digested once.
    return frozenset(_digests(distinctive_tokens(chunk).all, key))


def word_marks(text: str) -> list[int]:
    """The first MARK_BITS bits of the HMAC-SHA256 of each content word of ``text``, sorted: a tombstone keeps them."""
    return _marks(content_words(text), digest_key())


def _marks(words, key: bytes) -> list[int]:
    return sorted(
        {
            int.from_bytes(hmac.new(key, word.encode(), hashlib.sha256).digest()[:2]) >> (16 - MARK_BITS)
            for word in words
        }
    )


# A key word: a word of three letters or more ("PIN", "Haustür", "door") that is no function word, month or weekday.
MIN_KEY_CHARS = 3


def key_marks(text: str, *, names=frozenset()) -> list[int]:
    """The word marks (as ``word_marks``) of ``text``'s key words, but for ``names`` (normalised): what a number is
    about. A tombstone keeps them without the household's names (a name says who, not what): "pin=6093" and "die
    Haustür geht mit 6093 auf" are about the PIN of the front door, "La habitación de Lucía era la 0417" is not
    about Lucía's card PIN 0417. The words of a value are left out too: they are the value."""
    normalised = _normalise(text)
    # The letters of a value are the value, not what it is about ("Sonnenblume" of "Sonnenblume-8812").
    in_values = {
        word for chunk in _CHUNK.findall(normalised) if _DIGIT.search(chunk) for word in _LETTERS.findall(chunk)
    }
    in_values.update(word for _, _, value in whole_values(text) for word in _LETTERS.findall(value))
    words = {
        word
        for word in _LETTERS.findall(normalised)
        if len(word) >= MIN_KEY_CHARS
        and word not in DATE_WORDS
        and word not in names
        and word not in in_values
        and not is_function_word(word)
    }
    return _marks(words, digest_key())


def name_words(names) -> frozenset[str]:
    """The normalised words of these names and aliases ("Oma Helga" -> {"oma", "helga"})."""
    return frozenset(word for name in names for word in _LETTERS.findall(_normalise(name)))


def marks_needed(marks: list[int]) -> int:
    """How many of a text's word marks a tombstone must hold for the text to be made of its words; 0: never."""
    if len(marks) < MIN_SHARED_WORDS:
        return 0
    return max(MIN_SHARED_WORDS, math.ceil(SHARED_WORDS * len(marks)))


@dataclass(frozen=True)
class TextDigests:
    values: list[str]
    weak: list[str]
    fragment: bool
    marks: list[int]
    whole: list[str]
    numbers: list[str]  # the values that are no dates
    keys: list[int]  # the key marks of all its words


def text_digests(text: str) -> TextDigests:
    """The digests of ``text``'s values (numbers, codes, dates), of its weak tokens (rare words), its word marks,
    the digests of the whole values it carries as a reader sees it, of its numbers and codes, and its key marks."""
    tokens, key = distinctive_tokens(text), digest_key()
    return TextDigests(
        values=_digests(tokens.values, key),
        weak=_digests(tokens.weak, key),
        fragment=tokens.fragment,
        marks=_marks(content_words(text), key),
        whole=_digests({value for _, _, value in whole_values(text)}, key),
        numbers=_digests(tokens.numbers, key),
        keys=key_marks(text),
    )
