"""Tokens of ordinary text at the character limit: whether MAX_TEXT_CHARS of each supported language fits MAX_TEXT_TOKENS.

    flock /tmp/justai-bench.lock .venv/bin/python bench/text_limits.py [--windows 40]

Texts: the project's own translations (locale/de and locale/it, their msgstr: ordinary German and
Italian, the English msgid), Django's Spanish admin (its own translation catalogue) and XQuAD-R's
Wikipedia paragraphs (de/en/es, ../shared/data/xquad-r). Each source is joined into one stream and
cut into ``--windows`` texts of exactly MAX_TEXT_CHARS characters at evenly spaced offsets; each is
counted with e5-small's tokenizer (the default embedder's, as the API's check counts it). Prints,
per language and source, the median and the largest count and the share of the bound the largest uses.
"""

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA, ROOT, setup

MSGSTR = re.compile(r'^msg(id|str) "(.*)"\n((?:".*"\n)*)', re.MULTILINE)


def po_texts(path: Path, part: str) -> list[str]:
    """The ``part`` ("id" or "str") of every entry of a .po catalogue, as one string each (continuation lines joined)."""
    texts = []
    for kind, first, rest in MSGSTR.findall(path.read_text(encoding="utf-8")):
        if kind != part:
            continue
        text = first + "".join(line[1:-1] for line in rest.splitlines())
        text = text.replace("\\n", " ").replace('\\"', '"')
        if text.strip():
            texts.append(re.sub(r"%\([a-z_]+\)[sd]|\{[a-z_]+\}", "X", text))
    return texts


def xquad_texts(code: str) -> list[str]:
    data = json.loads((DATA / "xquad-r" / f"{code}.json").read_text(encoding="utf-8"))
    return [s for a in data["data"] for p in a["paragraphs"] for s in p["sentences"] if s.strip()]


def sources() -> dict[tuple[str, str], list[str]]:
    """(language, source) -> sentences."""
    import django

    admin_es = Path(django.__file__).parent / "contrib" / "admin" / "locale" / "es" / "LC_MESSAGES" / "django.po"
    found = {
        ("de", "locale .po"): po_texts(ROOT / "locale" / "de" / "LC_MESSAGES" / "django.po", "str"),
        ("it", "locale .po"): po_texts(ROOT / "locale" / "it" / "LC_MESSAGES" / "django.po", "str"),
        ("en", "locale .po msgid"): po_texts(ROOT / "locale" / "de" / "LC_MESSAGES" / "django.po", "id"),
        ("es", "Django admin .po"): po_texts(admin_es, "str"),
    }
    for code in ("de", "en", "es"):
        if (DATA / "xquad-r" / f"{code}.json").exists():
            found[(code, "XQuAD-R")] = xquad_texts(code)
    return found


def windows(sentences: list[str], *, chars: int, count: int) -> list[str]:
    """``count`` texts of exactly ``chars`` characters, cut at evenly spaced offsets of the joined sentences."""
    stream = " ".join(sentences)
    while len(stream) < 2 * chars:
        stream = f"{stream} {stream}"
    step = max(1, (len(stream) - chars) // max(1, count - 1))
    return [stream[i : i + chars].strip().ljust(chars, ".") for i in range(0, step * count, step)][:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=40)
    args = parser.parse_args()
    setup()
    from memories.embedders import embedder_by_name
    from memories.limits import MAX_TEXT_CHARS, MAX_TEXT_TOKENS

    e5 = embedder_by_name("e5-small")
    print(f"MAX_TEXT_CHARS {MAX_TEXT_CHARS}, MAX_TEXT_TOKENS {MAX_TEXT_TOKENS}; e5-small's tokenizer")
    print(f"{'language':8} {'source':18} {'texts':>5} {'median':>7} {'max':>5} {'max/bound':>9}")
    for (code, source), sentences in sources().items():
        counts = [e5.token_count(text) for text in windows(sentences, chars=MAX_TEXT_CHARS, count=args.windows)]
        largest = max(counts)
        print(
            f"{code:8} {source:18} {len(counts):5d} {statistics.median(counts):7.0f} {largest:5d} "
            f"{largest / MAX_TEXT_TOKENS:8.0%}{'  OVER' if largest > MAX_TEXT_TOKENS else ''}"
        )


if __name__ == "__main__":
    main()
