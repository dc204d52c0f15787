"""The one merge fold (store, edit and consolidation use it): counts, scores, dates, the subject/predicate pair."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import Memory, Provenance
from memories.services.fold import memories_fold, memories_merge_away
from memories.services.store import MemoryDraft, StoreOutcome, memory_store
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory


def memory(**fields) -> Memory:
    defaults = {"provenance": Provenance.EXTRACTED, "confidence": 0.5, "importance": 0.5, "occurrences": 1}
    return Memory(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("kept", "others", "expected"),
    [
        (("x", ""), [("", "z")], ("x", "")),  # never one from each: ("x", "z") was neither's
        (("", ""), [("cat", "name")], ("cat", "name")),
        (("x", ""), [("cat", "name")], ("cat", "name")),  # a complete pair replaces a half one
        (("cat", "name"), [("dog", "name")], ("cat", "name")),  # the kept pair stays
        (("", ""), [("", "z"), ("cat", "name"), ("dog", "age")], ("cat", "name")),  # the first complete one
    ],
)
def test_subject_and_predicate_move_together_as_a_pair(kept, others, expected):
    target = memory(subject=kept[0], predicate=kept[1])
    memories_fold(kept=target, others=[memory(subject=s, predicate=p) for s, p in others])
    assert (target.subject, target.predicate) == expected


def test_counts_add_scores_take_the_maximum_dates_the_earliest_and_provenance_the_highest():
    now = timezone.now()
    target = memory(occurrences=2, confidence=0.4, importance=0.9, valid_at=now, created_at=now - timedelta(days=1))
    others = [
        memory(provenance=Provenance.CONFIRMED, occurrences=3, confidence=0.8, importance=0.1, valid_at=None),
        memory(occurrences=1, valid_at=now - timedelta(days=5), created_at=None),
    ]
    memories_fold(kept=target, others=others)
    assert (target.occurrences, target.confidence, target.importance) == (6, 0.8, 0.9)
    assert (target.valid_at, target.created_at) == (now - timedelta(days=5), now - timedelta(days=1))
    assert target.provenance == Provenance.CONFIRMED


@pytest.mark.django_db
def test_about_is_kept_else_taken_over():
    anna, ben = PersonFactory(), PersonFactory()
    target = memory()
    memories_fold(kept=target, others=[memory(about=anna), memory(about=ben)])
    assert target.about_id == anna.pk
    memories_fold(kept=target, others=[memory(about=ben)])
    assert target.about_id == anna.pk


@pytest.mark.django_db
def test_a_store_merge_of_two_half_pairs_invents_no_pair():
    existing = MemoryFactory(content="Minka is the cat's name", subject="minka", predicate="")
    result = memory_store(
        draft=MemoryDraft(
            content="minka is the cat's name", provenance="extracted", source="session", predicate="name"
        ),
        actor="test",
    )
    assert result.outcome == StoreOutcome.MERGED and result.memory.pk == existing.pk
    existing.refresh_from_db()
    assert (existing.subject, existing.predicate) == ("minka", "")


@pytest.mark.django_db
def test_merging_away_moves_counts_and_successors_to_the_kept_memory_and_deletes_the_others():
    kept = MemoryFactory(content="The gate code is 4711", access_count=1, occurrences=1)
    twin = MemoryFactory(content="The gate code is 4711.", access_count=2, occurrences=2)
    old = MemoryFactory(content="The gate code was 1234", status="superseded", superseded_by=twin)
    other_kept = MemoryFactory(content="Anna likes jazz", access_count=0)
    other_twin = MemoryFactory(content="Anna likes jazz.", access_count=4)

    repointed = memories_merge_away(groups=[(kept, [twin]), (other_kept, [other_twin])])

    assert repointed == [(old.pk, kept.pk)]
    assert not Memory.objects.filter(pk__in=[twin.pk, other_twin.pk]).exists()
    old.refresh_from_db()
    assert old.superseded_by_id == kept.pk
    assert kept.occurrences == 3  # folded in memory: the caller saves it
    kept.refresh_from_db()
    other_kept.refresh_from_db()
    assert (kept.access_count, other_kept.access_count) == (3, 4)
