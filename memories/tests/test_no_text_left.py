"""Nothing keeps the text: after a forget, every table of the database is searched for it; only transcripts may hold it."""

import json
import logging

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection
from django.forms import MultiWidget

from memories.models import Memory, Provenance, Source
from memories.services.store import MemoryDraft, memory_store
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = pytest.mark.django_db

FACT = "Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur."
# The whole text and its rarest pieces (a generated tsvector, for one, would keep words, not the sentence).
NEEDLES = [FACT, "Ersatzschlüssel", "blauen Dose", "blauen"]
# Forgetting deletes memories, not transcripts: the turn that said it stays, with the forgotten memory's
# distinctive tokens (here the rare "Ersatzschlüssel") redacted (transcripts/tests/test_redaction.py).
MAY_KEEP_TEXT = {"transcripts_turn"}
REDACTED = ("Ersatzschlüssel", FACT)


def tables_containing(text: str) -> set[str]:
    """Every table (the whole row cast to text) that contains ``text``."""
    found = set()
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(
                f"SELECT count(*) FROM {connection.ops.quote_name(table)} AS row WHERE row::text ILIKE %s",
                [f"%{text}%"],
            )
            if cursor.fetchone()[0]:
                found.add(table)
    return found


@pytest.fixture
def remembered():
    """The fact said in a conversation (a transcript) and remembered as a memory."""
    anna, kitchen = PersonFactory(), RoomFactory()
    conversation = ConversationFactory(room=kitchen, speaker=anna)
    TurnFactory(conversation=conversation, speaker=anna, text=f"Merk dir bitte: {FACT}")
    draft = MemoryDraft(content=FACT, language="de", provenance=Provenance.CONFIRMED, source=Source.TOOL)
    memory = memory_store(draft=draft, actor=f"person:{anna.pk}").memory
    # The search itself works: before forgetting, the memory's table holds the text.
    assert tables_containing(FACT) == {"memories_memory", "transcripts_turn"}
    return anna, kitchen, memory


def test_the_search_covers_the_admin_log_and_the_job_tables():
    tables = set(connection.introspection.table_names())
    assert {"django_admin_log", "django_q_task", "django_q_ormq", "django_session", "memories_auditevent"} <= tables


def test_after_a_forget_through_the_api_only_the_transcript_holds_the_text(api, remembered, caplog):
    anna, kitchen, memory = remembered
    caplog.set_level(logging.DEBUG)
    found = api.post(
        "/internal/v1/memories/find_to_forget",
        {
            "query": "Bitte vergiss, wo der Ersatzschlüssel ist",
            "room_id": kitchen.pk,
            "speaker_id": anna.pk,
            "model_location": "local",
        },
    ).json()
    assert found["candidates"][0]["id"] == memory.pk
    # While the request is pending, neither its query nor the candidates' text is stored.
    for needle in NEEDLES:
        assert tables_containing(needle) <= MAY_KEEP_TEXT | {"memories_memory"}
    response = api.post(
        "/internal/v1/memories/forget",
        {"token": found["token"], "confirm": True, "speaker_id": anna.pk, "memory_ids": [memory.pk]},
    )
    assert response.json()["forgotten"] == 1

    for needle in NEEDLES:
        assert tables_containing(needle) == (set() if needle in REDACTED else MAY_KEEP_TEXT), needle
    for record in caplog.records:
        assert "Ersatzschl" not in record.getMessage() and "blauen" not in record.getMessage()


def _change_form_data(response) -> dict:
    """The admin change form's current values, as the browser would post them back."""
    form = response.context["adminform"].form
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if isinstance(field.widget, MultiWidget):
            for index, part in enumerate(field.widget.decompress(value)):
                data[f"{name}_{index}"] = "" if part is None else str(part)
        else:
            data[name] = "" if value is None else value
    return data


def test_after_an_admin_edit_and_deletion_only_the_transcript_holds_the_text(admin_client, remembered):
    _, _, memory = remembered
    url = f"/admin/memories/memory/{memory.pk}/"
    data = _change_form_data(admin_client.get(f"{url}change/"))
    data["importance"] = "0.9"
    response = admin_client.post(f"{url}change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert admin_client.post(f"{url}delete/", {"post": "yes"}).status_code == 302

    for needle in NEEDLES:
        assert tables_containing(needle) == (set() if needle in REDACTED else MAY_KEEP_TEXT), needle
    (changed, deleted) = LogEntry.objects.order_by("action_time")
    assert changed.object_repr == deleted.object_repr == f"Memory #{memory.pk}"
    # A change message names changed fields (by their labels), never their values.
    labels = {str(f.verbose_name).capitalize() for f in Memory._meta.fields}
    fields = json.loads(changed.change_message)[0]["changed"]["fields"]
    assert "Importance" in fields and set(fields) <= labels
    assert deleted.change_message == ""
