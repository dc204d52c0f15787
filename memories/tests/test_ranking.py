"""How recall ranks: BM25 keyword scores, the one fusion, the noise rule, dates in questions, and why each memory came."""

import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone

from memories.caller import Caller
from memories.embedders import HashEmbedder, Thresholds
from memories.models import Memory, Scope, Source
from memories.selectors import keywords
from memories.selectors.dates import question_dates
from memories.selectors.fusion import Ranking, fuse
from memories.selectors.keywords import keyword_hits
from memories.selectors.ranking import RecallTuning, context_lifts, ranked_memories
from memories.selectors.recall import recall_candidates
from memories.services.recall import memory_recall
from memories.tests.factories import MemoryFactory
from memories.tests.helpers import one_hot
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_statistics():
    keywords.forget_statistics()
    yield
    keywords.forget_statistics()


def analyze():
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    keywords.forget_statistics()


def ids(result):
    return [m.id for m in result.memories]


def test_a_rare_word_match_beats_a_long_match_on_common_words():
    room = RoomFactory()
    for n in range(30):  # "good", "day" and "home" are in many memories
        MemoryFactory(content=f"A good day at home number {n}", embedding=one_hot(n + 10))
    long_common = MemoryFactory(
        content="It was a good day, we stayed home, the weather was good and the day went by at home with good food",
        embedding=one_hot(1),
    )
    rare = MemoryFactory(content="Minka the cat sleeps on the sofa all afternoon long", embedding=one_hot(2))
    analyze()
    candidates = recall_candidates(speaker=None, room=room)

    hits = keyword_hits(candidates=candidates, query="Good day at home with Minka?", languages=["en"], limit=50)

    # The long memory matches three words, several times each; the rare name weighs more.
    assert hits[0].id == rare.pk
    assert hits[0].score > next(hit.score for hit in hits if hit.id == long_common.pk)


def test_a_tie_goes_to_the_memory_of_the_surer_path():
    # 7 is the vector path's sure first hit; 3 is middling on both paths: the same fused score.
    rankings = {
        "vector": Ranking(hits=[(7, 0.6), (3, 0.3)]),
        "keyword": Ranking(hits=[(3, 0.3)]),
    }
    fused = fuse(rankings, limit=10)
    assert [hit.id for hit in fused] == [7, 3]
    assert fused[0].score == fused[1].score
    assert fused[1].found_by["vector"].rank == 2 and fused[1].found_by["keyword"].rank == 1


def test_each_paths_first_hit_stays_and_scores_outweigh_middling_ranks_on_both():
    vector = Ranking(hits=[(1, 0.9), *((pk, 0.5) for pk in range(20, 30))], weight=0.3, keep=1)
    keyword = Ranking(hits=[(2, 10.0), *((pk, 4.0) for pk in range(20, 30))], relative=True, keep=1)
    fused = fuse({"vector": vector, "keyword": keyword}, limit=3)
    # Reciprocal rank fusion put 20 (2nd on both) above both firsts; here the keyword path's clear
    # first leads, and the vector path's first is kept although 20..29 outscore it.
    assert fused[0].id == 2
    assert 1 in {hit.id for hit in fused}


def one_hot_thresholds(*, context_min: float, recall_min: float = 0.2) -> Thresholds:
    """Thresholds for one-hot vectors: the scale from ``recall_min`` (unrelated) to 1.0 (the same vector)."""
    return dataclasses.replace(HashEmbedder.thresholds, recall_min=recall_min, related=1.0, context_min=context_min)


def near(similarity: float, index: int) -> np.ndarray:
    """A unit vector with exactly ``similarity`` to one_hot(0) (the query's vector below)."""
    return similarity * one_hot(0) + np.sqrt(1 - similarity**2) * one_hot(index)


def test_a_memory_below_both_paths_first_ten_reaches_the_top_when_it_is_strong_on_both():
    room = RoomFactory()
    # Twelve memories that hold every question word but nothing of its meaning, and twelve close
    # by meaning that share no word with it: each path's first ten are all of one kind.
    for n in range(12):
        MemoryFactory(content=f"Minka red ball number {n}", embedding=one_hot(n + 100))
        MemoryFactory(content=f"Toy fetched {n} times", embedding=near(0.9 - n * 0.01, n + 200))
    # Both: the same words in a slightly longer memory (13th by words), and 13th by meaning.
    both = MemoryFactory(content="Minka red ball under the old blue sofa", embedding=near(0.75, 300))
    analyze()
    candidates = recall_candidates(speaker=None, room=room)

    ranked = ranked_memories(
        candidates=candidates,
        query="Minka red ball",
        embedding=one_hot(0),
        languages=["en"],
        limit=10,
        thresholds=one_hot_thresholds(context_min=0.0),
        tuning=RecallTuning.for_embedder("hash"),
    )

    assert ranked[0].id == both.pk
    assert ranked[0].found_by["keyword"].rank == 13
    assert ranked[0].found_by["vector"].score == pytest.approx(0.75)  # its similarity counts, from the keyword pool
    # What either path alone puts first stays.
    firsts = {path for hit in ranked for path, found in hit.found_by.items() if found.rank == 1}
    assert {"keyword", "vector"} <= firsts


def test_a_supplementing_path_only_fills_free_places():
    rankings = {
        "vector": Ranking(hits=[(1, 0.5), (2, 0.4)]),
        "keyword_other_language": Ranking(hits=[(9, 8.0), (1, 3.0)], supplement=True),
    }
    assert [hit.id for hit in fuse(rankings, limit=10)] == [1, 2, 9]
    assert [hit.id for hit in fuse(rankings, limit=2)] == [1, 2]


def test_a_date_in_the_question_lifts_the_memory_of_that_date():
    room = RoomFactory()
    may = MemoryFactory(
        content="Beim Arzt wurde Blut abgenommen", language="de", valid_at=datetime(2025, 5, 14, 9, tzinfo=UTC)
    )
    september = MemoryFactory(
        content="Beim Arzt wurde Blut abgenommen.", language="de", valid_at=datetime(2025, 9, 3, 9, tzinfo=UTC)
    )
    for question, first in (("Was war im Mai beim Arzt?", may), ("Was war im September beim Arzt?", september)):
        result = memory_recall(
            query=question, caller=Caller(room=room, speaker=None, model_location="local", language="de")
        )
        assert ids(result)[0] == first.pk
        assert "date" in result.memories[0].found_by
        assert "date" not in result.memories[1].found_by


def test_a_relative_date_counts_from_today():
    room = RoomFactory()
    yesterday = MemoryFactory(
        content="Abbiamo comprato il pane", language="it", valid_at=timezone.now() - timedelta(days=1)
    )
    MemoryFactory(content="Abbiamo comprato il pane.", language="it", valid_at=timezone.now() - timedelta(days=40))
    result = memory_recall(
        query="Cosa abbiamo comprato ieri?",
        caller=Caller(room=room, speaker=None, model_location="local", language="it"),
    )
    assert ids(result)[0] == yesterday.pk


def test_question_dates_reads_spans_in_the_households_languages():
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    spans = {
        q: [
            (s.start.date().isoformat(), s.end.date().isoformat(), s.every_year)
            for s in question_dates(query=q, languages=["it", "de", "en"], now=now)
        ]
        for q in (
            "Wann war der Termin im Mai?",
            "in July 2023",
            "Cosa è successo ieri?",
            "Wofür ist 4711?",
            "Was geschah 1990?",
            "Was haben wir letzte Woche gemacht?",
        )
    }
    assert spans["Wann war der Termin im Mai?"] == [("2026-05-01", "2026-06-01", True)]  # any May
    assert spans["in July 2023"] == [("2023-07-01", "2023-08-01", False)]
    assert spans["Cosa è successo ieri?"] == [("2026-11-30", "2026-12-01", False)]
    assert spans["Wofür ist 4711?"] == []  # a number is no date
    assert spans["Was geschah 1990?"] == [("1990-01-01", "1991-01-01", False)]  # a year, read without dateparser
    assert spans["Was haben wir letzte Woche gemacht?"] == [("2026-11-23", "2026-11-30", False)]


def test_question_dates_are_read_in_the_first_characters_of_a_question_only():
    """dateparser's search costs ~2 s per 1,000 characters: a 4,000-character question is read in its beginning."""
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    early = "Wann war der Termin im Mai? " + "Und was dann? " * 280
    late = "Und was dann? " * 280 + "Wann war der Termin im Mai?"
    assert len(question_dates(query=early, languages=["de"], now=now)) == 1
    assert question_dates(query=late, languages=["de"], now=now) == []


def test_relative_dates_count_from_the_given_now_not_the_wall_clock():
    now = datetime(2020, 3, 10, 12, tzinfo=UTC)
    for query, expected in (
        ("Was war gestern?", ("2020-03-09", "2020-03-10")),
        ("Was haben wir letzte Woche gemacht?", ("2020-03-02", "2020-03-09")),
    ):
        [span] = question_dates(query=query, languages=["de", "en"], now=now)
        assert (span.start.date().isoformat(), span.end.date().isoformat()) == expected


def test_a_german_question_from_an_italian_speaker_brings_no_unrelated_memory():
    room = RoomFactory()
    giulia = PersonFactory(preferred_language="it")
    # Far from the question by meaning; they share only function words with it ("ist", "der").
    MemoryFactory(content="Der Code für das Gartentor ist 4711", language="de", embedding=one_hot(3))
    MemoryFactory(content="Die Katze ist der Liebling der Familie", language="de", embedding=one_hot(4))
    MemoryFactory(content="Il gatto è il preferito della famiglia", language="it", embedding=one_hot(5))
    analyze()

    result = memory_recall(
        query="Wann ist der Termin beim Arzt?", caller=Caller(room=room, speaker=giulia, model_location="local")
    )

    assert ids(result) == []
    assert "No long-term memories match" in result.prompt

    appointment = MemoryFactory(
        content="Der Termin beim Arzt ist am Montag um neun", language="de", embedding=one_hot(6)
    )
    assert ids(
        memory_recall(
            query="Wann ist der Termin beim Arzt?", caller=Caller(room=room, speaker=giulia, model_location="local")
        )
    ) == [appointment.pk]


def test_a_weak_keyword_only_match_far_from_the_question_by_meaning_is_left_out():
    room = RoomFactory()
    query = "Termin Zahnarzt Kalender"
    strong = MemoryFactory(content="Termin beim Zahnarzt steht im Kalender", language="de", embedding=one_hot(3))
    weak = MemoryFactory(
        content="Der Kalender hängt in der Küche neben dem Kühlschrank", language="de", embedding=one_hot(4)
    )
    analyze()
    result = memory_recall(query=query, caller=Caller(room=room, speaker=None, model_location="local"))
    assert ids(result) == [strong.pk]
    # The same weak words, close by meaning: it stays.
    from memories.embedders import get_embedder

    weak.embedding = get_embedder().embed_query(query)
    weak.save(update_fields=["embedding"])
    assert set(ids(memory_recall(query=query, caller=Caller(room=room, speaker=None, model_location="local")))) == {
        strong.pk,
        weak.pk,
    }


def test_each_memory_says_why_it_came_back_and_the_prompt_shows_no_scores():
    room = RoomFactory()
    anna = PersonFactory(preferred_language="en")
    both = MemoryFactory(content="The gate code is 4711")
    about = MemoryFactory(content="Anna likes jazz", about=anna, embedding=one_hot(9))
    analyze()
    result = memory_recall(
        query="What is the gate code?", caller=Caller(room=room, speaker=anna, model_location="local")
    )
    why = {m.id: m.found_by for m in result.memories}
    assert why[both.pk]["vector"].rank == 1 and why[both.pk]["vector"].score > 0.2
    assert why[both.pk]["keyword"].rank == 1 and why[both.pk]["keyword"].score > 0
    assert set(why[about.pk]) == {"about_speaker"}
    assert "0." not in result.prompt.split("\n", 1)[1] and "rank" not in result.prompt


def test_before_the_first_analyze_the_statistics_are_asked_for_again_within_a_minute(monkeypatch):
    for n in range(30):
        MemoryFactory(content=f"Ein guter Tag zu Hause Nummer {n}", language="de")
    now = [1000.0]
    monkeypatch.setattr(keywords.time, "monotonic", lambda: now[0])
    assert keywords.keyword_statistics().rows == {}  # no ANALYZE yet: every word would weigh the same
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")  # autovacuum's first ANALYZE
    now[0] += 60
    assert keywords.keyword_statistics().rows  # counted without waiting for STATISTICS_TTL


def test_lexeme_statistics_without_a_known_table_size_count_nothing_and_the_keyword_path_answers():
    """PostgreSQL keeps reltuples at -1 while the table's size is unknown; frequencies times -1 were negative row
    counts, and BM25's idf then took the logarithm of a negative number (a 500 for every keyword search)."""
    for n in range(30):
        MemoryFactory(content=f"Die Katze schläft im Korb Nummer {n}", language="de")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("UPDATE pg_class SET reltuples = -1 WHERE oid = 'memories_memory'::regclass")
    keywords.forget_statistics()
    assert keywords.keyword_statistics().rows == {}
    hits = keywords.keyword_hits(
        candidates=Memory.objects.all(), query="Hat Anna eine Katze?", languages=["de"], limit=5
    )
    assert len(hits) == 5 and all(hit.score > 0 for hit in hits)


def conversation_memories(texts_and_vectors, *, source_ref="conversation:1", **fields):
    """Memories stored one after another from one conversation, as extraction stores its items."""
    return [
        MemoryFactory(content=text, embedding=vector, source=Source.SESSION, source_ref=source_ref, **fields)
        for text, vector in texts_and_vectors
    ]


def test_the_reply_next_to_a_hit_from_the_same_conversation_comes_back():
    room = RoomFactory()
    # Closer to the question by meaning than the reply, but from no conversation.
    for n in range(4):
        MemoryFactory(content=f"Filler note {n}", embedding=near(0.30 - n * 0.005, 10 + n))
    hit, reply, _, beyond = conversation_memories(
        [
            ("Anna just got new running shoes", near(0.35, 1)),
            ("For the park on Sundays", near(0.25, 2)),  # no word of the question
            ("Ben made tea", near(0.01, 3)),
            ("The tea was too hot", near(0.26, 4)),  # three places after the hit
        ]
    )
    MemoryFactory(content="A note stored right after", embedding=near(0.24, 5), source=Source.TOOL)  # no conversation
    analyze()
    candidates = recall_candidates(speaker=None, room=room)

    def ranked(**tuning):
        return ranked_memories(
            candidates=candidates,
            query="new running shoes",
            embedding=one_hot(0),
            languages=["en"],
            limit=3,
            thresholds=one_hot_thresholds(context_min=0.0),
            tuning=RecallTuning(**tuning),
        )

    result = ranked()
    assert [r.id for r in result][:2] == [hit.pk, reply.pk]
    assert result[1].found_by["context"].rank == 1 and result[1].found_by["context"].score > 0
    assert beyond.pk not in [r.id for r in result]
    assert reply.pk not in [r.id for r in ranked(context_path=False)]


def test_a_neighbour_below_the_context_floor_stays_out():
    room = RoomFactory()
    # Closer to the question than the neighbours, from no conversation: the vector path's other hits.
    for n in range(4):
        MemoryFactory(content=f"Filler note {n}", embedding=near(0.30 - n * 0.01, 10 + n))
    hit, reply, unrelated = conversation_memories(
        [
            ("Anna just got new running shoes", near(0.35, 1)),
            ("For the park on Sundays", near(0.16, 2)),  # above the context floor
            ("The door code is 2580", near(0.09, 3)),  # below it
        ]
    )
    analyze()

    def ranked(context_min):
        result = ranked_memories(
            candidates=recall_candidates(speaker=None, room=room),
            query="new running shoes",
            embedding=one_hot(0),
            languages=["en"],
            limit=5,
            thresholds=one_hot_thresholds(context_min=context_min, recall_min=0.05),
            # The relevance floor (0.35 - 0.1 x 0.95) lies above context_min: the floor is context_min.
            tuning=RecallTuning(relevance_margin=0.1),
        )
        return [r.id for r in result]

    assert ranked(0.12)[:2] == [hit.pk, reply.pk] and unrelated.pk not in ranked(0.12)
    assert unrelated.pk in ranked(0.0)  # without a floor it came along


def beside_fillers(texts_and_similarities, *, query, limit, context_min, relevance_margin):
    """Four notes from no conversation close to the question (the vector path's other hits), then one conversation
    of ``texts_and_similarities`` (each text with its similarity to the question): its memories and the ranking."""
    room = RoomFactory()
    for n in range(4):
        MemoryFactory(content=f"Filler note {n}", embedding=near(0.30 - n * 0.01, 10 + n))
    memories = conversation_memories(
        [(text, near(similarity, i)) for i, (text, similarity) in enumerate(texts_and_similarities, start=1)]
    )
    analyze()
    result = ranked_memories(
        candidates=recall_candidates(speaker=None, room=room),
        query=query,
        embedding=one_hot(0),
        languages=["en"],
        limit=limit,
        thresholds=one_hot_thresholds(context_min=context_min, recall_min=0.05),
        tuning=RecallTuning(relevance_margin=relevance_margin),
    )
    return memories, result


def test_a_neighbour_the_vector_path_would_bring_on_its_own_passes_a_higher_context_floor():
    (_, within, below), result = beside_fillers(
        [
            ("Anna just got new running shoes", 0.35),
            ("For the park on Sundays", 0.20),  # below context_min, above the relevance floor
            ("The door code is 2580", 0.12),  # below both
        ],
        query="new running shoes",
        limit=6,
        context_min=0.3,
        relevance_margin=0.2,  # floor 0.35 - 0.2 x 0.95 = 0.16
    )
    found = [r.id for r in result]
    assert within.pk in found and "context" in result[found.index(within.pk)].found_by
    assert below.pk not in found


def asked_and_answered(*, answer_similarity: float):
    return beside_fillers(
        [
            ("How did the kids like the trip to the zoo?", 0.35),
            ("They loved it, the penguins most of all", answer_similarity),
            ("Ben made tea", 0.01),
        ],
        query="how did the kids like the zoo",
        limit=5,
        context_min=0.12,
        relevance_margin=0.1,
    )


def test_the_reply_to_a_memory_that_asks_comes_just_above_it():
    (question, reply, _), result = asked_and_answered(answer_similarity=0.16)
    assert [r.id for r in result][:2] == [reply.pk, question.pk]
    assert result[0].found_by["context"].rank == 1


def test_a_reply_below_the_context_floor_is_not_lifted_and_the_next_memory_never_takes_its_place():
    (question, reply, after), result = asked_and_answered(answer_similarity=0.09)
    found = [r.id for r in result]
    assert found[0] == question.pk
    assert reply.pk not in found and after.pk not in found


def test_a_lifted_neighbour_stays_below_the_memory_that_lifted_it():
    lifts = dict(context_lifts({1: 0.2, 2: 0.18, 3: 0.05}, {1: [2, 3]}, weight=RecallTuning().context_weight))
    assert 0.18 + lifts[2] < 0.2  # 0.4 x 0.2 would carry it past its candidate
    assert lifts[3] == pytest.approx(RecallTuning().context_weight * 0.2)
    assert (
        dict(context_lifts({1: 0.2, 2: 0.25}, {1: [2]}, weight=RecallTuning().context_weight)) == {}
    )  # already above: nothing to add
    replied = dict(context_lifts({1: 0.2, 2: 0.05, 3: 0.05}, {1: [2, 3]}, weight=0.4, replies={1: 2}))
    assert 0.05 + replied[2] > 0.2 > 0.05 + replied[3]  # only the reply to a question passes it


def test_context_never_brings_what_the_speaker_may_not_see():
    room = RoomFactory()
    anna, ben = PersonFactory(), PersonFactory()
    _, *secrets, after = conversation_memories(
        [
            ("Anna just got new running shoes", near(0.35, 1)),
            ("Their price", near(0.1, 2)),  # below recall_min: no candidate on its own
            ("Her size", near(0.1, 3)),
            ("Sundays", near(0.25, 4)),  # three places after the hit, the first Ben may see
        ],
        room=room,
        scope=Scope.ROOM,
    )
    for secret in secrets:
        secret.scope, secret.owner, secret.room = Scope.PRIVATE, anna, None
        secret.save()
    analyze()

    def found_by(speaker):
        result = ranked_memories(
            candidates=recall_candidates(speaker=speaker, room=room),
            query="new running shoes",
            embedding=one_hot(0),
            languages=["en"],
            limit=5,
            thresholds=one_hot_thresholds(context_min=0.0),
            tuning=RecallTuning.for_embedder("hash"),
        )
        return {r.id: r.found_by for r in result}

    for speaker in (ben, None):
        found = found_by(speaker)
        assert not {secret.pk for secret in secrets} & set(found)
        assert "context" in found[after.pk]  # positions count among what the speaker may see
    as_anna = found_by(anna)
    assert all("context" in as_anna[secret.pk] for secret in secrets)
    assert "context" not in as_anna.get(after.pk, {})


def test_with_e5s_compressed_similarities_the_memory_that_means_the_question_wins_among_word_matches():
    """e5 places an unrelated sentence at 0.76 and a match at 0.90: on its scale (0.75 -> 0.84) that is 0.1
    against 1.7, where relative to the best it was 0.84 against 1."""
    room = RoomFactory()
    words = MemoryFactory(content="Minka red ball", embedding=near(0.76, 1))
    meaning = MemoryFactory(content="Minka red ball under the old blue sofa", embedding=near(0.90, 2))
    analyze()
    e5 = dataclasses.replace(HashEmbedder.thresholds, recall_min=0.75, related=0.84, context_min=0.80)

    ranked = ranked_memories(
        candidates=recall_candidates(speaker=None, room=room),
        query="Minka red ball",
        embedding=one_hot(0),
        languages=["en"],
        limit=10,
        thresholds=e5,
        tuning=RecallTuning.for_embedder("e5-small"),
    )

    assert [hit.id for hit in ranked] == [meaning.pk, words.pk]
    assert ranked[1].found_by["keyword"].rank == 1  # the shorter memory matches the words better


def test_the_ranking_parameters_are_one_frozen_value_per_embedder():
    e5, usem3, other = (RecallTuning.for_embedder(name) for name in ("e5-small", "usem3", "fastembed"))
    assert (e5.vector_weight, e5.context_weight) == (0.5, 0.6)
    assert (usem3.vector_weight, usem3.context_weight) == (0.2, 0.4)
    assert other == RecallTuning()
    assert (e5.relevance_margin, usem3.relevance_margin) == (0.6, 0.5) and e5.keyword_pool == 40
    with pytest.raises(dataclasses.FrozenInstanceError):
        e5.vector_weight = 1.0
    assert dataclasses.replace(e5, context_path=False).context_path is False
    assert RecallTuning.for_embedder("e5-small").context_path is True  # a variant changes no one else's
