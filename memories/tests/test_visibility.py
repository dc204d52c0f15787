"""Property: no read path returns a memory the speaker may not see, and recall misses none it may see."""

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories.caller import Caller
from memories.embedders import get_embedder
from memories.limits import RECALL_LIMIT_MAX
from memories.models import Memory, MemoryAccess, Scope, Status
from memories.selectors.context import context_neighbours
from memories.selectors.keywords import keyword_hits
from memories.selectors.ranking import vector_hits
from memories.selectors.recall import about_speaker_hits, recall_candidates
from memories.services.recall import memory_recall
from people.models import Person, Room

TEXT = "the spare key is in the blue tin"

memory_specs = st.fixed_dictionaries(
    {
        "scope": st.sampled_from(Scope.values),
        "owner": st.integers(0, 2),
        "room": st.integers(0, 2),
        "about": st.one_of(st.none(), st.integers(0, 2)),
        "superseded": st.booleans(),
    }
)
households = st.fixed_dictionaries(
    {
        "people": st.integers(1, 3),
        "rooms": st.integers(1, 3),
        "memories": st.lists(memory_specs, max_size=12),
        "speaker": st.one_of(st.none(), st.integers(0, 2)),  # None: an unknown speaker
        "room": st.integers(0, 2),
    }
)


def may_see(spec: dict, *, speaker: int | None, room: int) -> bool:
    """The rule, written out independently of the code under test."""
    if spec["scope"] in (Scope.SHARED, Scope.SYSTEM):
        return True
    if spec["scope"] == Scope.ROOM:
        return spec["room"] == room
    return speaker is not None and spec["owner"] == speaker


def build(household: dict):
    people = [Person.objects.create(name=f"Person {i}") for i in range(household["people"])]
    rooms = [Room.objects.create(name=f"Room {i}") for i in range(household["rooms"])]
    embedding = get_embedder().embed_query(TEXT)
    expected_visible, expected_recall = set(), set()
    for spec in household["memories"]:
        spec = {**spec, "owner": spec["owner"] % len(people), "room": spec["room"] % len(rooms)}
        memory = Memory.objects.create(
            content=TEXT,
            embedding=embedding,
            provenance="confirmed",
            source="session",
            source_ref="conversation:1",  # all from one conversation: each other's context in recall
            scope=spec["scope"],
            owner=people[spec["owner"]] if spec["scope"] == Scope.PRIVATE else None,
            room=rooms[spec["room"]] if spec["scope"] == Scope.ROOM else None,
            about=people[spec["about"] % len(people)] if spec["about"] is not None else None,
            status=Status.SUPERSEDED if spec["superseded"] else Status.ACTIVE,
        )
        speaker = household["speaker"] % len(people) if household["speaker"] is not None else None
        if may_see(spec, speaker=speaker, room=household["room"] % len(rooms)):
            expected_visible.add(memory.pk)
            if not spec["superseded"]:
                expected_recall.add(memory.pk)
    speaker = people[household["speaker"] % len(people)] if household["speaker"] is not None else None
    return speaker, rooms[household["room"] % len(rooms)], expected_visible, expected_recall


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(household=households)
def test_no_read_path_returns_an_invisible_memory(household):
    with transaction.atomic():
        speaker, room, visible, recallable = build(household)

        assert set(Memory.objects.visible_to(speaker=speaker, room=room).values_list("pk", flat=True)) == visible
        candidates = recall_candidates(speaker=speaker, room=room)
        embedding = get_embedder().embed_query(TEXT)
        by_vector = {
            pk for pk, _ in vector_hits(candidates=candidates, embedding=embedding, limit=50, min_similarity=0)
        }
        by_keyword = {hit.id for hit in keyword_hits(candidates=candidates, query=TEXT, languages=["en"], limit=50)}
        assert by_vector == by_keyword == recallable  # every visible one, nothing else
        if speaker is not None:
            about = {
                pk
                for pk, _ in about_speaker_hits(candidates=candidates, speaker=speaker, embedding=embedding, exclude=[])
            }
            assert about <= recallable
        context = context_neighbours(
            candidates=candidates, ids=sorted(recallable), embedding=embedding, min_similarity=-1.0
        )
        assert set(context.similarity) <= recallable
        assert {pk for near in context.neighbours.values() for pk in near} <= recallable
        recalled = {
            m.id
            for m in memory_recall(
                query=TEXT, caller=Caller(room=room, speaker=speaker, model_location="local"), limit=RECALL_LIMIT_MAX
            ).memories
        }
        assert recalled == recallable
        # Only what was returned was counted as accessed.
        assert set(MemoryAccess.objects.filter(count__gt=0).values_list("memory_id", flat=True)) == recalled
        transaction.set_rollback(True)
