"""The admin: deleting a memory is forgetting, tombstones are listed without text and lifted after a confirmation,
deleting a person goes through person_delete."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.models import DELETION, LogEntry

from memories.models import AuditEvent, Memory, Provenance, Scope, Source, Tombstone
from memories.services.forget import memories_forget
from memories.services.store import MemoryDraft, StoreOutcome, memory_store
from memories.tests.factories import MemoryFactory
from memories.tests.helpers import one_hot
from people.models import Person
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import ExtractionStatus
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db

MEMORIES = "/admin/memories/memory/"
TOMBSTONES = "/admin/memories/tombstone/"
PEOPLE = "/admin/people/person/"


def store(content, **fields):
    draft = MemoryDraft(
        content=content, provenance=Provenance.EXTRACTED, source=Source.SESSION, language="de", **fields
    )
    return memory_store(draft=draft, actor="test")


def test_deleting_one_memory_shows_the_stock_page_then_forgets_it(admin_client, admin_user):
    memory = store("Der Code für das Gartentor ist 4711.").memory
    page = admin_client.get(f"{MEMORIES}{memory.pk}/delete/")
    assert page.status_code == 200
    assert "admin/delete_confirmation.html" in [t.name for t in page.templates]
    assert Memory.objects.filter(pk=memory.pk).exists()

    response = admin_client.post(f"{MEMORIES}{memory.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Memory.objects.filter(pk=memory.pk).exists()
    tombstone = Tombstone.objects.get()
    assert (tombstone.memory_id, tombstone.forgotten_by_user) == (memory.pk, admin_user)
    assert AuditEvent.objects.filter(memory_id=memory.pk, action="forgotten", actor=f"admin:{admin_user.pk}").exists()
    entry = LogEntry.objects.get(action_flag=DELETION)
    assert (entry.object_repr, entry.change_message) == (f"Memory #{memory.pk}", "")
    # It stays forgotten: the store path blocks it.
    assert store("Der Code für das Gartentor ist 4711.").outcome == StoreOutcome.BLOCKED


def test_bulk_deleting_memories_confirms_first_then_forgets_each(admin_client):
    memories = [store(text).memory for text in ("Die Katze heißt Minka.", "Am Dienstag kommt die Müllabfuhr.")]
    keep = store("Anna trinkt gern grünen Tee.").memory
    data = {"action": "delete_selected", ACTION_CHECKBOX_NAME: [m.pk for m in memories]}
    page = admin_client.post(MEMORIES, data)
    assert page.status_code == 200
    assert "admin/delete_selected_confirmation.html" in [t.name for t in page.templates]
    assert Memory.objects.count() == 3 and not Tombstone.objects.exists()

    response = admin_client.post(MEMORIES, {**data, "post": "yes"})
    assert response.status_code == 302
    assert list(Memory.objects.values_list("pk", flat=True)) == [keep.pk]
    assert sorted(Tombstone.objects.values_list("memory_id", flat=True)) == sorted(m.pk for m in memories)
    assert sorted(LogEntry.objects.values_list("object_repr", flat=True)) == sorted(f"Memory #{m.pk}" for m in memories)


def test_the_tombstone_list_shows_owner_scope_and_date_but_no_text(admin_client):
    anna = PersonFactory(name="Anna")
    secret = store("Meine Geheimnummer ist 2468.", scope=Scope.PRIVATE, owner=anna).memory
    memories_forget(memory_ids=[secret.pk], actor="test")
    page = admin_client.get(TOMBSTONES)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Anna" in html and "private" in html.lower()
    assert "Geheimnummer" not in html and "2468" not in html
    detail = admin_client.get(f"{TOMBSTONES}{Tombstone.objects.get().pk}/change/").content.decode()
    assert "Geheimnummer" not in detail
    assert "field-owner" in detail and "field-embedding" not in detail  # the admin's row class per field
    assert "field-what_it_is" in detail and "field-digests" not in detail and "field-word_marks" not in detail
    assert "field-key_marks" not in detail


def test_a_tombstone_counts_what_it_blocked_and_when(admin_client):
    gate = store("Der Code für das Gartentor ist 4711.").memory
    [tombstone] = memories_forget(memory_ids=[gate.pk], actor="test")
    assert store("Der Code für das Gartentor ist 4711.").outcome == StoreOutcome.BLOCKED
    assert store("Gartentor: 4711").outcome == StoreOutcome.BLOCKED
    tombstone.refresh_from_db()
    assert tombstone.blocked_count == 2 and tombstone.last_blocked_at is not None
    html = admin_client.get(TOMBSTONES).content.decode()
    assert '<td class="field-blocked">2<br>' in html and "4711" not in html
    detail = admin_client.get(f"{TOMBSTONES}{tombstone.pk}/change/").content.decode()
    assert "field-blocked_count" in detail and "field-last_blocked_at" in detail and "4711" not in detail
    assert admin_client.get(f"{TOMBSTONES}add/").status_code == 403


def test_lifting_a_block_asks_first_and_then_lets_the_content_back(admin_client, admin_user):
    gate = store("Der Code für das Gartentor ist 4711.").memory
    cat = store("Die Katze heißt Minka.").memory
    memories_forget(memory_ids=[gate.pk, cat.pk], actor="test")
    gate_block = Tombstone.objects.get(memory_id=gate.pk)
    data = {"action": "lift_blocks", ACTION_CHECKBOX_NAME: [gate_block.pk]}

    page = admin_client.post(TOMBSTONES, data)
    assert page.status_code == 200
    assert "admin/memories/tombstone/lift_confirmation.html" in [t.name for t in page.templates]
    assert 'value="lift_blocks"' in page.content.decode()
    assert Tombstone.objects.count() == 2

    response = admin_client.post(TOMBSTONES, {**data, "post": "yes"})
    assert response.status_code == 302
    assert list(Tombstone.objects.values_list("memory_id", flat=True)) == [cat.pk]
    assert AuditEvent.objects.filter(memory_id=gate.pk, action="block_lifted", actor=f"admin:{admin_user.pk}").exists()
    assert store("Der Code für das Gartentor ist 4711.").outcome == StoreOutcome.CREATED
    assert store("Die Katze heißt Minka.").outcome == StoreOutcome.BLOCKED


def test_tombstones_have_no_plain_bulk_delete(admin_client):
    page = admin_client.get(TOMBSTONES)
    actions = [choice[0] for choice in page.context["action_form"].fields["action"].choices]
    assert "lift_blocks" in actions and "delete_selected" not in actions


def test_deleting_a_person_lists_their_private_memories_and_blocks_their_conversations(admin_client):
    anna, kitchen = PersonFactory(name="Anna"), RoomFactory()
    private = [
        MemoryFactory(content="Meine Geheimnummer ist 2468.", scope=Scope.PRIVATE, owner=anna),
        MemoryFactory(content="Ich bin allergisch gegen Erdnüsse.", scope=Scope.PRIVATE, owner=anna),
    ]
    conversation = ConversationFactory(room=kitchen, speaker=anna, extraction_status=ExtractionStatus.QUEUED)

    page = admin_client.get(f"{PEOPLE}{anna.pk}/delete/").content.decode()
    for memory in private:
        assert f'href="{MEMORIES}{memory.pk}/change/"' in page
    assert "“Meine Geheimnummer ist 2468.”" in page and "never be turned into memories" in page

    response = admin_client.post(f"{PEOPLE}{anna.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Person.objects.exists() and not Memory.objects.exists()
    conversation.refresh_from_db()
    assert conversation.extraction_blocked and conversation.speaker is None


def test_bulk_deleting_people_goes_through_person_delete(admin_client):
    anna, ben, kitchen = PersonFactory(), PersonFactory(), RoomFactory()
    conversations = [ConversationFactory(room=kitchen, speaker=p) for p in (anna, ben)]
    MemoryFactory(scope=Scope.PRIVATE, owner=anna)
    data = {"action": "delete_selected", ACTION_CHECKBOX_NAME: [anna.pk, ben.pk]}
    page = admin_client.post(PEOPLE, data)
    assert "never be turned into memories" in page.content.decode()
    assert admin_client.post(PEOPLE, {**data, "post": "yes"}).status_code == 302
    assert not Person.objects.exists() and not Memory.objects.exists()
    for conversation in conversations:
        conversation.refresh_from_db()
        assert conversation.extraction_blocked


def test_forgetting_from_a_search_lists_only_what_matched_and_says_why(admin_client):
    gate = store("Der Code für das Gartentor ist 4711.").memory
    plumber = MemoryFactory(content="Call 4711 for the plumber", embedding=one_hot(9))
    store("Anna trinkt gern grünen Tee.")
    nothing = admin_client.get(MEMORIES, {"q": "xyzzy"})
    assert nothing.context["cl"].result_count == 0
    found = admin_client.get(MEMORIES, {"q": "4711"}).context["cl"]
    assert found.result_count == 2
    data = {"action": "delete_selected", "select_across": "1", "index": "0", ACTION_CHECKBOX_NAME: [gate.pk]}
    page = admin_client.post(f"{MEMORIES}?q=4711", data)
    html = page.content.decode()
    assert "Found by the search “4711”" in html
    assert html.count('class="forget-why"') == 2 and "Anna trinkt" not in html
    assert f'#{plumber.pk}: Call 4711 for the plumber <small class="forget-why">(holds words of the search)' in html
    assert "holds words of the search, close in meaning (similarity" in html


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_forgetting_says_forgotten_by_the_first_words_and_lifting_says_lifted(admin_client):
    gate = store("Der Code für das Gartentor ist 4711 und gilt ab Montag.").memory
    tea = store("Anna trinkt gern grünen Tee.").memory
    cat = store("Die Katze heißt Minka.").memory
    one = admin_client.post(f"{MEMORIES}{gate.pk}/delete/", {"post": "yes"}, follow=True)
    assert messages_of(one) == [
        "Forgotten: “Der Code für das Gartentor ist …”. A forget block without text keeps it from being stored again."
    ]
    assert one.redirect_chain[-1][0] == MEMORIES
    data = {"action": "delete_selected", "post": "yes", ACTION_CHECKBOX_NAME: [tea.pk, cat.pk]}
    bulk = admin_client.post(MEMORIES, data, follow=True)
    assert messages_of(bulk) == ["Forgot 2 memories: forget blocks without text keep them from being stored again."]
    assert not Memory.objects.exists() and Tombstone.objects.count() == 3
    block = Tombstone.objects.order_by("pk").first()
    lifted = admin_client.post(f"{TOMBSTONES}{block.pk}/delete/", {"post": "yes"}, follow=True)
    assert lifted.redirect_chain[-1][0] == TOMBSTONES
    assert messages_of(lifted) == ["Lifted 1 forget block: its content may be remembered again."]
    german = admin_client.post(
        f"{TOMBSTONES}{Tombstone.objects.first().pk}/delete/", {"post": "yes"}, follow=True, HTTP_ACCEPT_LANGUAGE="de"
    )
    assert "gelöscht" not in " ".join(messages_of(german))
    everything = " ".join(messages_of(one) + messages_of(bulk) + messages_of(lifted)).lower()
    assert "delete" not in everything and "memory #" not in everything
