"""Consolidation: prune unused old guesses, merge near-identical memories, supersede contradicted facts.

Under a PostgreSQL advisory lock, the near-duplicate candidates are searched first (read-only, see
``selectors.near_duplicates``), then three rules run in this order in one transaction:

1. **prune**: active ``inferred`` memories never recalled (access count 0) and learned more than
   90 days ago are deleted (no tombstone: a guess nobody used is not a forget). A guess that
   already replaced older facts is kept, or they would be left with no active successor. Access
   rows without their memory and recall counts of days over RECALL_DAYS_KEPT (400) ago go too.
2. **merge**: active memories of the same scope, owner and room within the embedder's ``duplicate``
   threshold, and with the same numbers and dates, collapse into one (connected groups in one run).
   The higher provenance stays, else the newer (``created_at``, then id). Counts add up, importance
   and confidence take the maximum, dates merge (earliest learned and valid, latest accessed).
   The others are deleted (their content lives on in the one that stays: a merge, not a forget).
3. **supersede**: active *facts* of the same scope, owner, room, normalised subject and predicate
   that survived step 2 contradict each other (preferences, procedures, notes and episodes of one
   subject coexist: "Julian likes jazz" and "Julian likes short answers" are both true): the newest (``valid_at``, ``created_at``, id) stays
   active, every older one becomes ``superseded`` pointing at it. Never deleted.

Candidate pairs for step 2 come from comparisons within small clusters of similar memories, in SQL
(``selectors.near_duplicates``), judged again under row locks; step 3 is one GROUP BY statement;
nothing compares all pairs.
"""

import functools
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django_q.tasks import async_task

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.embedding_space import active_embedder
from memories.locks import LockId, advisory_lock, advisory_lock_free
from memories.models import (
    PROVENANCE_RANK,
    RECALL_DAYS_KEPT,
    AuditAction,
    AuditEvent,
    ConsolidationRun,
    Memory,
    Provenance,
    RecallDay,
    RunStatus,
)
from memories.scopes import DUPLICATE_SCOPE_KEYS, duplicate_scope_columns
from memories.selectors.duplicates import is_duplicate
from memories.selectors.near_duplicates import Pair, near_duplicate_pairs, pairs_within
from memories.services.fold import memories_merge_away

logger = logging.getLogger(__name__)

ALREADY_RUNNING = "A consolidation is already running; wait until it has finished and try again."
CONSOLIDATE_JOB = "memories.jobs.memories_consolidate_job"
INTERRUPTED = "Interrupted"  # error of a run whose process ended before it could finish
LOST = "Lost"  # error of a queued run whose job never started (the queue lost it)
# A queued run waits for the cluster and at most for one run going (seconds to minutes at 100k).
QUEUED_LOST_AFTER = timedelta(hours=1)
PRUNE_AFTER = timedelta(days=90)
BATCH_SIZE = 2000

Progress = Callable[[str, int, int], None]


class Rule:
    PRUNE = "prune"
    MERGE = "merge"
    SUPERSEDE = "supersede"
    # An already superseded memory pointed at the one that now replaces its successor (not counted).
    REPOINT = "repoint"


@dataclass(frozen=True)
class Change:
    """One change of a run, text-free: what happened to which memory (and which other memory it concerns)."""

    rule: str
    memory_id: int
    related_memory_id: int | None = None


@contextmanager
def _consolidation_lock() -> Iterator[None]:
    """Hold the session-level advisory lock for the block; ApplicationError (409) when another run holds it."""
    with advisory_lock(LockId.CONSOLIDATION) as acquired:
        if not acquired:
            raise ApplicationError(ALREADY_RUNNING, status=409)
        yield


def memories_consolidate(
    *, started_by: str, dry_run: bool = False, progress: Progress | None = None, queued: ConsolidationRun | None = None
) -> ConsolidationRun:
    """Prune, merge and supersede once under an advisory lock; record the run and return it.

    ``started_by``: "schedule", "command" or "admin:<user id>". Raises ApplicationError (status 409,
    ``ALREADY_RUNNING``) when another run holds the lock. ``progress(stage, done, total)`` is called
    per batch. ``queued``: a run recorded by ``memories_consolidate_queue`` becomes this run (its
    ``started_by`` and ``dry_run`` apply). The returned run carries ``run.changes`` (a list of ``Change``, ids and rules only;
    not stored). A dry run does the same work in a transaction that is rolled back, so it reports
    exactly what a real run would change; it writes no memory and no audit event, only run rows.
    """
    report = progress or (lambda stage, done, total: None)
    with _consolidation_lock():
        # Holding the lock, any run still marked running died with its process (the lock went with it),
        # and a run queued long ago whose job never started was lost by the queue.
        now = timezone.now()
        ConsolidationRun.objects.filter(status=RunStatus.RUNNING).update(
            status=RunStatus.FAILED, error=INTERRUPTED, finished_at=now
        )
        ConsolidationRun.objects.filter(status=RunStatus.QUEUED, started_at__lt=now - QUEUED_LOST_AFTER).exclude(
            pk=getattr(queued, "pk", None)
        ).update(status=RunStatus.FAILED, error=LOST, finished_at=now)
        if queued is None:
            run = ConsolidationRun.objects.create(started_by=started_by, dry_run=dry_run)
        else:
            run, dry_run = queued, queued.dry_run
            run.status, run.started_at = RunStatus.RUNNING, timezone.now()
            run.save(update_fields=["status", "started_at"])
        started = time.monotonic()
        try:
            threshold = active_embedder().thresholds.duplicate
            # Read-only and the slow part, so outside the transaction; judged again under lock.
            candidates = near_duplicate_pairs(threshold=threshold, progress=report)
            with transaction.atomic():
                changes = _consolidate(
                    candidates=candidates, threshold=threshold, actor=Actor.consolidation(run.pk), report=report
                )
                if dry_run:
                    transaction.set_rollback(True)
        except Exception as exc:
            run.status, run.error = RunStatus.FAILED, type(exc).__name__
            _finish(run, started)
            # The class name only: database errors can quote row values, i.e. memory text.
            logger.error("consolidation run %s failed: %s", run.pk, type(exc).__name__)
            raise
        run.merged = sum(1 for c in changes if c.rule == Rule.MERGE)
        run.superseded = sum(1 for c in changes if c.rule == Rule.SUPERSEDE)
        run.deleted = sum(1 for c in changes if c.rule == Rule.PRUNE)
        run.status = RunStatus.DONE
        _finish(run, started)
    run.changes = changes
    logger.info(
        "consolidation run %s%s: merged %d, superseded %d, deleted %d in %d ms",
        run.pk,
        " (dry run)" if dry_run else "",
        run.merged,
        run.superseded,
        run.deleted,
        run.duration_ms,
    )
    return run


@transaction.atomic
def memories_consolidate_queue(*, started_by: str, dry_run: bool = False) -> ConsolidationRun:
    """Record a queued run and queue the job that runs it (after commit); ApplicationError (409) while one runs."""
    if not advisory_lock_free(LockId.CONSOLIDATION):
        raise ApplicationError(ALREADY_RUNNING, status=409)
    run = ConsolidationRun.objects.create(started_by=started_by, dry_run=dry_run, status=RunStatus.QUEUED)
    transaction.on_commit(
        functools.partial(async_task, CONSOLIDATE_JOB, run.pk, task_name=f"memory.consolidate:{run.pk}")
    )
    return run


def memories_consolidate_queued(*, run_id: int) -> ConsolidationRun | None:
    """Run a queued run; None when it is not queued (any more). Another run going: it fails with ``ALREADY_RUNNING``."""
    queued = ConsolidationRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).first()
    if queued is None:
        return None
    try:
        return memories_consolidate(started_by=queued.started_by, queued=queued)
    except ApplicationError as exc:
        if exc.status != 409:
            raise
        queued.status, queued.error, queued.finished_at = RunStatus.FAILED, ALREADY_RUNNING, timezone.now()
        queued.save(update_fields=["status", "error", "finished_at"])
        return queued


def _finish(run: ConsolidationRun, started: float) -> None:
    run.finished_at = timezone.now()
    run.duration_ms = round((time.monotonic() - started) * 1000)
    run.save()


def _consolidate(*, candidates: set[Pair], threshold: float, actor: str, report: Progress) -> list[Change]:
    now = timezone.now()
    changes = _prune(now=now, report=report)
    changes += _merge(candidates=candidates, threshold=threshold, now=now, report=report)
    changes += _supersede(now=now, report=report)
    AuditEvent.objects.bulk_create(
        (
            AuditEvent(
                memory_id=c.memory_id,
                action=_AUDIT_ACTIONS[c.rule],
                related_memory_id=c.related_memory_id,
                actor=actor,
                created_at=now,
            )
            for c in changes
        ),
        batch_size=BATCH_SIZE,
    )
    return changes


_AUDIT_ACTIONS = {
    Rule.PRUNE: AuditAction.DELETED,
    Rule.MERGE: AuditAction.MERGED,
    Rule.SUPERSEDE: AuditAction.SUPERSEDED,
    Rule.REPOINT: AuditAction.SUPERSEDED,
}


def _batches(items: list, size: int = BATCH_SIZE) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _delete(ids: list[int]) -> None:
    # The ORM delete, so that relations other apps add to Memory are honoured.
    for batch in _batches(ids):
        Memory.objects.filter(pk__in=batch).only("pk").delete()


# --- 1. prune -----------------------------------------------------------------------------------


ORPHAN_ACCESS_SQL = """
DELETE FROM memories_memoryaccess a WHERE NOT EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = a.memory_id)
"""


def _prune(*, now: datetime, report: Progress) -> list[Change]:
    """Delete active guesses never recalled and learned over 90 days ago (not those that replaced older facts)."""
    ids = list(
        Memory.objects.active()
        .filter(provenance=Provenance.INFERRED, created_at__lt=now - PRUNE_AFTER)
        .exclude(access__count__gt=0)
        .exclude(Exists(Memory.objects.filter(superseded_by=OuterRef("pk"))))
        .order_by("pk")
        # Recall's bump does not lock the memory's row (see MemoryAccess): a guess first recalled in
        # the moment between this statement and the commit is still deleted, as if just before.
        .select_for_update(of=("self",))
        .values_list("pk", flat=True)
    )
    _delete(ids)
    # Access rows whose memory is gone (a bump that raced with a forget): ids and counts only.
    with connection.cursor() as cursor:
        cursor.execute(ORPHAN_ACCESS_SQL)
    # Recall counts of days long past (dates and counts only).
    RecallDay.objects.filter(day__lt=timezone.localdate(now) - timedelta(days=RECALL_DAYS_KEPT)).delete()
    report(Rule.PRUNE, len(ids), len(ids))
    return [Change(Rule.PRUNE, pk) for pk in ids]


# --- 2. merge -----------------------------------------------------------------------------------


class _Groups:
    """Union-find: near-identical pairs to connected groups (a~b~c is one group)."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)

    def groups(self) -> list[list[int]]:
        by_root: dict[int, list[int]] = {}
        for x in self.parent:
            by_root.setdefault(self.find(x), []).append(x)
        return [sorted(g) for g in by_root.values() if len(g) > 1]


def _winner_key(memory: Memory) -> tuple:
    return (PROVENANCE_RANK[memory.provenance], memory.created_at, memory.pk)


# The merged counts, scores and dates of the memories that stay, one statement per batch (Django's
# bulk_update builds a CASE per field and row, which costs seconds of Python at thousands of rows).
FOLD_SQL = """
UPDATE memories_memory m
SET occurrences = v.occurrences, importance = v.importance,
    confidence = v.confidence, created_at = v.created_at, valid_at = v.valid_at,
    subject = v.subject, predicate = v.predicate, about_id = v.about_id, updated_at = %s
FROM unnest(
    %s::bigint[], %s::integer[], %s::double precision[], %s::double precision[],
    %s::timestamptz[], %s::timestamptz[], %s::text[], %s::text[], %s::bigint[]
) AS v(id, occurrences, importance, confidence, created_at, valid_at, subject, predicate, about_id)
WHERE m.id = v.id
"""
FOLD_FIELDS = [
    "pk",
    "occurrences",
    "importance",
    "confidence",
    "created_at",
    "valid_at",
    "subject",
    "predicate",
    "about_id",
]


def _merge(*, candidates: set[Pair], threshold: float, now: datetime, report: Progress) -> list[Change]:
    """Collapse groups of near-identical active memories into their best member."""
    involved = sorted({pk for pair in candidates for pk in pair})
    rows: dict[int, Memory] = {}
    for batch in _batches(involved):
        # Locked and re-read: whatever changed since the neighbour search is judged as it is now.
        rows.update(
            (m.pk, m)
            for m in Memory.objects.active()
            .filter(pk__in=batch)
            .order_by("pk")
            .defer("embedding", "search_vector")
            .select_related("access")
            .select_for_update(of=("self",))
        )
    groups = _Groups()
    for (a, b), similarity in sorted(pairs_within(pairs=candidates, threshold=threshold).items()):
        first, second = rows.get(a), rows.get(b)
        if first and second and is_duplicate(first, second, similarity=similarity, threshold=threshold):
            groups.union(a, b)

    merges = []  # (winner, losers) per group: the best member stays
    for group in groups.groups():
        members = sorted((rows[pk] for pk in group), key=_winner_key, reverse=True)
        merges.append((members[0], members[1:]))
    changes = [Change(Rule.MERGE, loser.pk, winner.pk) for winner, losers in merges for loser in losers]

    repoints: list[Change] = []
    done, total = 0, len(changes) + len(merges)
    for batch in _batches(merges):
        repointed = memories_merge_away(groups=batch)
        repoints += [Change(Rule.REPOINT, pk, winner) for pk, winner in repointed]
        with connection.cursor() as cursor:
            winners = [winner for winner, _ in batch]
            cursor.execute(FOLD_SQL, [now, *([getattr(w, name) for w in winners] for name in FOLD_FIELDS)])
        done += len(batch) + sum(len(losers) for _, losers in batch)
        report(Rule.MERGE, done, total)
    return changes + repoints


# --- 3. supersede -------------------------------------------------------------------------------

# Groups of active facts with the same scope/owner/room and normalised subject/predicate
# (GROUP BY ... HAVING count > 1); in each, every row but the newest is superseded by the newest,
# and memories those rows had superseded are pointed at the newest too.
SUPERSEDE_SQL = f"""
WITH keyed AS (
    SELECT m.id, m.valid_at, m.created_at, {duplicate_scope_columns("m")},
           lower(btrim(m.subject)) AS subject_key, lower(btrim(m.predicate)) AS predicate_key
    FROM memories_memory m
    WHERE m.status = 'active' AND m.kind = 'fact' AND btrim(m.subject) <> '' AND btrim(m.predicate) <> ''
),
contested AS (
    SELECT {DUPLICATE_SCOPE_KEYS}, subject_key, predicate_key
    FROM keyed
    GROUP BY {DUPLICATE_SCOPE_KEYS}, subject_key, predicate_key
    HAVING count(*) > 1
),
ranked AS (
    SELECT k.id,
           first_value(k.id) OVER w AS newest,
           row_number() OVER w AS position
    FROM keyed k
    JOIN contested USING ({DUPLICATE_SCOPE_KEYS}, subject_key, predicate_key)
    WINDOW w AS (
        PARTITION BY {DUPLICATE_SCOPE_KEYS}, subject_key, predicate_key
        ORDER BY k.valid_at DESC, k.created_at DESC, k.id DESC
    )
),
superseded AS (
    UPDATE memories_memory m
    SET status = 'superseded', superseded_by_id = r.newest, updated_at = %(now)s
    FROM ranked r
    WHERE m.id = r.id AND r.position > 1 AND m.status = 'active'
    RETURNING m.id, r.newest
),
repointed AS (
    UPDATE memories_memory m
    SET superseded_by_id = s.newest, updated_at = %(now)s
    FROM superseded s
    WHERE m.superseded_by_id = s.id
    RETURNING m.id, s.newest
)
SELECT id, newest, 'supersede' FROM superseded
UNION ALL
SELECT id, newest, 'repoint' FROM repointed
ORDER BY 3 DESC, 1
"""


def _supersede(*, now: datetime, report: Progress) -> list[Change]:
    """Supersede every older active fact of a contested subject/predicate by the newest (facts only)."""
    with connection.cursor() as cursor:
        cursor.execute(SUPERSEDE_SQL, {"now": now})
        rows = cursor.fetchall()
    report(Rule.SUPERSEDE, len(rows), len(rows))
    return [Change(Rule.SUPERSEDE if rule == "supersede" else Rule.REPOINT, pk, newest) for pk, newest, rule in rows]
