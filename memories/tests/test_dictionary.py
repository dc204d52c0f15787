"""memories.dictionary: FreeDict's dictd files, read an entry at a time (a dictzip written here, and the installed ones)."""

import gzip
import struct
import zlib

from memories.dictionary import BASE64, Dictionary, translations_in, word_translations

CHUNK = 64


def base64_number(value: int) -> str:
    digits = ""
    while True:
        digits = BASE64[value % 64] + digits
        value //= 64
        if not value:
            return digits


def write_dictzip(path, data: bytes) -> None:
    """A dictzip file: gzip whose deflate stream is flushed in CHUNK-byte chunks listed in an RA extra field."""
    compressor, chunks = zlib.compressobj(9, zlib.DEFLATED, -15), []
    for start in range(0, len(data), CHUNK):
        chunks.append(compressor.compress(data[start : start + CHUNK]) + compressor.flush(zlib.Z_FULL_FLUSH))
    chunks[-1] += compressor.flush(zlib.Z_FINISH)
    field = struct.pack("<HHH", 1, CHUNK, len(chunks)) + struct.pack(f"<{len(chunks)}H", *map(len, chunks))
    extra = b"RA" + struct.pack("<H", len(field)) + field
    header = b"\x1f\x8b\x08" + bytes([4 | 8]) + b"\0\0\0\0\x02\x03" + struct.pack("<H", len(extra)) + extra
    trailer = struct.pack("<II", zlib.crc32(data), len(data))
    path.write_bytes(header + b"entries.dict\0" + b"".join(chunks) + trailer)


ENTRIES = {
    "klempner": "Klempner /klempner/ <masc, n, sg>\n [Dt.] plumber <n>\n   Synonyms: {Installateur}\n see: {Spengler}\n",
    "schlüssel": 'Schlüssel\n1. key <n>, spanner [Br.]\n2. code\n      "den Schlüssel abziehen"  - pull off the key\n',
    "zebra": "Zebra\nzebra\n",
}


def write_dictionary(folder, name: str, entries: dict[str, str]) -> None:
    """``name``.index and ``name``.dict.dz as dictd writes them: the index sorted by the lower-cased headwords."""
    data, lines = b"", []
    for word in sorted(entries):
        text = entries[word].encode()
        lines.append(f"{word}\t{base64_number(len(data))}\t{base64_number(len(text))}\n")
        data += text
    (folder / f"{name}.index").write_text("".join(lines), encoding="utf-8")
    write_dictzip(folder / f"{name}.dict.dz", data)


def test_an_entry_is_read_from_its_chunks_and_its_translations_without_markup(tmp_path):
    write_dictionary(tmp_path, "freedict-deu-eng", ENTRIES)
    assert sum(map(len, ENTRIES.values())) > 2 * CHUNK  # an entry spans chunks
    dictionary = Dictionary("de", "en", tmp_path / "freedict-deu-eng.index", tmp_path / "freedict-deu-eng.dict.dz")
    assert [translations_in(entry) for entry in dictionary.lookup("Schlüssel")] == [["key", "spanner", "code"]]
    assert [translations_in(entry) for entry in dictionary.lookup("KLEMPNER")] == [["plumber"]]
    assert dictionary.lookup("zebra") == [ENTRIES["zebra"]]
    assert dictionary.lookup("aal") == dictionary.lookup("zzz") == dictionary.lookup("kl") == []


def test_the_folder_setting_decides_which_dictionaries_are_read_and_a_foreign_file_is_left_out(tmp_path, settings):
    write_dictionary(tmp_path, "freedict-deu-eng", ENTRIES)
    (tmp_path / "freedict-deu-ita.index").write_text("klempner\tA\tB\n")
    (tmp_path / "freedict-deu-ita.dict.dz").write_bytes(gzip.compress(b"Klempner\nidraulico\n"))  # not a dictzip
    settings.SEARCH_DICTIONARY_DIR = str(tmp_path)
    assert word_translations("Klempner") == [("plumber", "en")]
    settings.SEARCH_DICTIONARY_DIR = str(tmp_path / "missing")
    assert word_translations("Klempner") == []


def test_the_installed_dictionaries_translate_between_the_household_languages(freedict):
    assert ("plumber", "en") in word_translations("Klempner")
    assert ("chiave", "it") in word_translations("Schlüssel")
    assert ("Schlüssel", "de") in word_translations("chiave")
    assert word_translations("xyzzy") == word_translations("  ") == []
