"""The committed translations: every translated entry of each locale/*/django.po is in the compiled django.mo.

The .mo files are committed (a machine without GNU gettext serves them as they are); this fails when a
.po was changed without compiling it again (manage.py compilemessages, docs/admin.md).
"""

import ast
import gettext
from pathlib import Path

import pytest
from django.conf import settings

LOCALE = Path(settings.BASE_DIR) / "locale"
LANGUAGES = ["de", "it"]


def po_entries(path: Path) -> dict[str, str | list[str]]:
    """msgid -> msgstr (or the plural forms) of a .po file as makemessages writes it; untranslated ones left out.
    An entry with a context is keyed as the compiled catalogue keys it: "context\x04msgid"."""
    entries: dict[str, str | list[str]] = {}
    current: dict[str, str] = {}
    key = None

    def flush():
        if current.get("msgid"):
            if "msgctxt" in current:
                current["msgid"] = f"{current['msgctxt']}\x04{current['msgid']}"
            if "msgid_plural" in current:
                forms = [current[k] for k in sorted(k for k in current if k.startswith("msgstr["))]
                if all(forms):
                    entries[current["msgid"]] = forms
            elif current.get("msgstr"):
                entries[current["msgid"]] = current["msgstr"]
        current.clear()

    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip():
            flush()
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            current[key] += ast.literal_eval(line)
        else:
            key, _, value = line.partition(" ")
            current[key] = ast.literal_eval(value)
    return entries


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_compiled_catalog_holds_every_translation_of_the_po_file(language):
    folder = LOCALE / language / "LC_MESSAGES"
    entries = po_entries(folder / "django.po")
    with (folder / "django.mo").open("rb") as mo:
        catalog = gettext.GNUTranslations(mo)
    assert len(entries) > 200
    stale = []
    for msgid, translation in entries.items():
        if isinstance(translation, list):
            if [catalog.ngettext(msgid, msgid, n) for n in (1, 2)] != translation[:2]:
                stale.append(msgid)
        elif catalog.gettext(msgid) != translation:
            stale.append(msgid)
    assert not stale, f"locale/{language}: run manage.py compilemessages; not compiled: {stale[:5]}"


def msgids(path: Path) -> list[str]:
    """Every entry's msgctxt + msgid of a .po file, in order (the header's empty msgid left out)."""
    found, key, entry = [], None, {}
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip():
            if entry.get("msgid"):
                found.append(f"{entry.get('msgctxt', '')}\x04{entry['msgid']}")
            entry = {}
        elif line.startswith('"') and key:
            entry[key] += ast.literal_eval(line)
        elif not line.startswith("#"):
            key, _, value = line.partition(" ")
            entry[key] = ast.literal_eval(value)
    return found


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_message_is_defined_once(language):
    """msgfmt refuses a catalogue with a msgid twice (two branches that each added it, merged)."""
    ids = msgids(LOCALE / language / "LC_MESSAGES" / "django.po")
    twice = sorted({msgid.split("\x04")[1] for msgid in ids if ids.count(msgid) > 1})
    assert len(ids) > 200 and not twice, f"locale/{language}: defined twice: {twice}"
