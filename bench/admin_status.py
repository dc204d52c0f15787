"""The admin's status page at household scale and beyond: how long its queries take, against the memory list's count.

    flock /tmp/justai-bench.lock .venv/bin/python bench/admin_status.py [--memories 10000 100000] [--repeat 5]

Fills a throwaway embedded PostgreSQL with N memories (created over the last 60 days, mixed labels,
a third recalled at some point, all with one constant vector: the page never reads vectors), 400 days
of recall counts and N/20 conversations (ended over 60 days, mixed extraction outcomes, 1 % failed
with a retry scheduled), with INSERT ... SELECT generate_series. Then times, median of ``--repeat``: each part of the status
page that reads the database (the three charts and the extractions needing attention) and the whole
``admin_status()`` minus the model provider's probe (a network call, bounded by AI_PROBE_TIMEOUT),
against the baseline of the same run: ``Memory.objects.count()``, which the memory list runs on
every visit.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import setup


def fill(n: int) -> None:
    from django.db import connection

    from memories.embedders import configured_dim

    dim = configured_dim()
    vector = "[" + ",".join(["1"] + ["0"] * (dim - 1)) + "]"
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE memories_memory, memories_memoryaccess, memories_recallday, transcripts_conversation CASCADE"
        )
        from people.models import Room

        room = Room.objects.get_or_create(name="bench")[0].pk
        cursor.execute(
            """
            INSERT INTO memories_memory (kind, content, language, embedding, provenance, confidence, importance,
                occurrences, source, source_ref, scope, subject, predicate, status, valid_at, created_at, updated_at)
            SELECT 'fact', 'bench memory ' || i, 'en', %s::vector,
                (ARRAY['confirmed', 'observed', 'extracted', 'inferred'])[1 + i %% 4], 1, 0.5, 1, 'tool', '',
                'shared', '', '', 'active', now(), now() - (i %% 60) * interval '1 day' - (i %% 1440) * interval '1 minute',
                now()
            FROM generate_series(1, %s) AS i
            """,
            [vector, n],
        )
        cursor.execute(
            """
            INSERT INTO memories_memoryaccess (memory_id, count, last_accessed_at)
            SELECT id, 1 + id %% 7, now() - (id %% 45) * interval '1 day' FROM memories_memory WHERE id %% 3 = 0
            """,
            [],
        )
        # Recalls per day for the 400 days kept (RECALL_DAYS_KEPT): the chart reads the last 30 of them.
        cursor.execute(
            "INSERT INTO memories_recallday (day, count) SELECT current_date - i, 1 + i %% 50 FROM generate_series(0, 399) AS i",
            [],
        )
        cursor.execute(
            """
            INSERT INTO transcripts_conversation (room_id, language, model_location, started_at, ended_at, ended_by,
                extraction_status, extraction_blocked, extraction_attempts, extraction_stats, extraction_error)
            SELECT %s, 'de', 'local', now() - (i %% 60) * interval '1 day' - interval '1 hour',
                now() - (i %% 60) * interval '1 day', 'idle',
                (ARRAY['done', 'done', 'done', 'skipped', 'done', 'done', 'done', 'done', 'done', 'done',
                       'done', 'done', 'done', 'done', 'done', 'done', 'done', 'done', 'done', 'failed'])[1 + i %% 20],
                false, 1, '{}'::jsonb, ''
            FROM generate_series(1, %s) AS i
            """,
            [room, max(n // 20, 1)],
        )
        cursor.execute("ANALYZE")


def median_ms(fn, repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    setup(embedder="hash")

    from unittest import mock

    from django.utils import timezone

    from justai_memory.admin import status
    from memories.models import Memory

    days = status._days(timezone.localdate())
    parts = {
        "memories chart": lambda: status.memories_chart(days),
        "recalls chart": lambda: status.recalls_chart(days),
        "extractions chart": lambda: status.extractions_chart(days),
        "extractions needing attention": lambda: status.extractions_needing_attention(),
    }
    offline = {"role": "memory", "ok": False, "model_listed": None, "error": "bench: not probed"}
    print(f"{'memories':>9} {'part':<32} {'ms':>8} {'x count()':>10}")
    for n in args.memories:
        fill(n)
        baseline = median_ms(lambda: Memory.objects.count(), args.repeat)
        print(f"{n:>9} {'baseline: Memory.objects.count()':<32} {baseline:>8.1f} {1:>10.1f}")
        for name, fn in parts.items():
            ms = median_ms(fn, args.repeat)
            print(f"{n:>9} {name:<32} {ms:>8.1f} {ms / baseline:>10.1f}")
        with mock.patch("justai_memory.edge.health.provider_status", return_value=offline):
            ms = median_ms(status.admin_status, args.repeat)
        print(f"{n:>9} {'admin_status() without the probe':<32} {ms:>8.1f} {ms / baseline:>10.1f}")


if __name__ == "__main__":
    main()
