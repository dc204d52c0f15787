"""Bilingual dictionaries: the translations of a word between the household's languages, read from FreeDict's files.

FreeDict's dictionaries are Debian packages (``dict-freedict-deu-eng`` ...; GPL, data read where the
system installed them, never copied into the project) in the dictd format: ``freedict-SRC-DST.index``, a sorted
list of lower-cased headwords with the offset and length of each entry (base64 numbers), and
``freedict-SRC-DST.dict.dz``, the entries compressed with dictzip (gzip in chunks that inflate on their own,
so one entry is read without the rest). Every pair of ``MAIN_LANGUAGES`` whose files are in
``settings.SEARCH_DICTIONARY_DIR`` is read; without any, a word has no translations.
"""

import functools
import logging
import mmap
import re
import struct
import zlib
from pathlib import Path

from django.conf import settings

from memories.languages import MAIN_LANGUAGES

logger = logging.getLogger(__name__)

# The Debian packages of the dictionaries between German, Italian and English (docs/admin.md).
FREEDICT_PACKAGES = tuple(
    f"dict-freedict-{pair}" for pair in ("deu-eng", "deu-ita", "eng-deu", "eng-ita", "ita-deu", "ita-eng")
)
# FreeDict names its dictionaries by ISO 639-3 codes.
FREEDICT_CODES = {"de": "deu", "en": "eng", "it": "ita", "es": "spa", "fr": "fra"}
BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# An entry's lines that are not translations: cross references, synonyms, notes and quoted examples.
NOT_A_TRANSLATION = ("synonym", "see:", "note:", '"')
# Labels ([Dt.], [techn.]), parts of speech (<n>, <masc>), references ({...}), a pronunciation (/vet/) and a
# sense's number ("1. ").
MARKUP = re.compile(r"\[[^\]]*\]|<[^>]*>|\{[^}]*\}|(?:^|(?<=\s))/[^/\s,]+/|^\s*\d+\.\s")


def number(text: bytes) -> int:
    """A dictd index number: base64 digits, most significant first."""
    value = 0
    for digit in text.decode("ascii"):
        value = value * 64 + BASE64.index(digit)
    return value


class Dictzip:
    """Random access to a dictzip file (RFC 1952 with an ``RA`` extra field listing its chunks' sizes), mapped into
    memory: reads share no file position, so threads may read at once."""

    def __init__(self, path: Path):
        with path.open("rb") as file:
            self.data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        flags = self.data[3]
        (extra_length,) = struct.unpack("<H", self.data[10:12])
        extra, self.chunk_length, chunks = self.data[12 : 12 + extra_length], 0, []
        while len(extra) >= 4:
            tag, size = extra[:2], struct.unpack("<H", extra[2:4])[0]
            if tag == b"RA":
                _, self.chunk_length, count = struct.unpack("<HHH", extra[4:10])
                chunks = struct.unpack(f"<{count}H", extra[10 : 10 + 2 * count])
            extra = extra[4 + size :]
        if self.data[:3] != b"\x1f\x8b\x08" or not flags & 4 or not chunks:
            raise ValueError(f"{path} is not a dictzip file")
        start = 12 + extra_length
        for flag in (8, 16):  # a zero-terminated file name, then a comment
            if flags & flag:
                start = self.data.find(b"\0", start) + 1
                if not start:
                    raise ValueError(f"{path} is not a dictzip file")
        self.starts = [start + (2 if flags & 2 else 0)]
        for size in chunks:
            self.starts.append(self.starts[-1] + size)

    def read(self, offset: int, length: int) -> bytes:
        first, last = offset // self.chunk_length, (offset + length - 1) // self.chunk_length
        data = b"".join(
            zlib.decompressobj(-15).decompress(self.data[self.starts[chunk] : self.starts[chunk + 1]])
            for chunk in range(first, last + 1)
        )
        skip = offset - first * self.chunk_length
        return data[skip : skip + length]


class Dictionary:
    """One dictd dictionary: its index mapped into memory (searched by bisection over its bytes) and its entries."""

    def __init__(self, source: str, target: str, index: Path, entries: Path):
        self.source, self.target = source, target
        with index.open("rb") as file:
            self.index = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        self.entries = Dictzip(entries)

    def line_at(self, position: int) -> int:
        """Where the first line that starts at ``position`` or after it starts (the index's size: none)."""
        if position == 0 or self.index[position - 1 : position] == b"\n":
            return position
        end = self.index.find(b"\n", position)
        return len(self.index) if end < 0 else end + 1

    def headword(self, start: int) -> bytes:
        return self.index[start : self.index.find(b"\t", start)]

    def lookup(self, word: str) -> list[str]:
        """The entries whose headword is ``word`` (lower-cased, as the index spells it)."""
        key, size = word.lower().encode(), len(self.index)
        low, high = 0, size
        while low < high:
            middle = (low + high) // 2
            start = self.line_at(middle)
            if start >= size or self.headword(start) >= key:
                high = middle
            else:
                low = middle + 1
        found, start = [], self.line_at(low)
        while start < size and self.headword(start) == key:
            end = self.index.find(b"\n", start)
            end = size if end < 0 else end
            _, offset, length = self.index[start:end].split(b"\t")
            found.append(self.entries.read(number(offset), number(length)).decode("utf-8", "replace"))
            start = end + 1
        return found


def translations_in(entry: str) -> list[str]:
    """The translations an entry gives: its lines after the headword's, less labels, notes and references."""
    found = []
    for line in entry.splitlines()[1:]:
        line = MARKUP.sub(" ", line).strip()
        if not line or line.lower().startswith(NOT_A_TRANSLATION):
            continue
        found.extend(" ".join(part.split()) for part in re.split(r"[,;]", line) if part.strip())
    return found


@functools.lru_cache(maxsize=4)
def dictionaries(folder: str) -> tuple[Dictionary, ...]:
    """The dictionaries between two of the household's languages that ``folder`` holds (none if it is missing)."""
    found = []
    for source in MAIN_LANGUAGES:
        for target in MAIN_LANGUAGES:
            name = f"freedict-{FREEDICT_CODES[source]}-{FREEDICT_CODES[target]}"
            index, entries = Path(folder) / f"{name}.index", Path(folder) / f"{name}.dict.dz"
            if source != target and index.is_file() and entries.is_file():
                try:
                    found.append(Dictionary(source, target, index, entries))
                except (OSError, ValueError) as exc:  # an empty or foreign file: that pair is left out
                    logger.warning("dictionary %s left out: %s", name, exc)
    return tuple(found)


def word_translations(word: str) -> list[tuple[str, str]]:
    """(translation, its language) of ``word`` in every dictionary of ``SEARCH_DICTIONARY_DIR``, each once, in the
    dictionaries' order; [] when none has it (or there is no dictionary)."""
    word = word.strip()
    if not word:
        return []
    found: dict[str, str] = {}
    for dictionary in dictionaries(settings.SEARCH_DICTIONARY_DIR):
        try:
            entries = dictionary.lookup(word)
        except (ValueError, zlib.error) as exc:  # a damaged file: the other dictionaries still answer
            logger.warning("dictionary %s-%s unreadable: %s", dictionary.source, dictionary.target, exc)
            continue
        for entry in entries:
            for translation in translations_in(entry):
                if translation.lower() != word.lower():
                    found.setdefault(translation, dictionary.target)
    return list(found.items())
