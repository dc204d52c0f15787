"""The audit trail of what came through an OAuth connection names that connection with the speaker, in process."""

import json
from types import SimpleNamespace

import pytest
from django.utils import translation
from oauth2_provider.models import get_application_model

from connections.models import Access, Connection
from justai_memory.mcp import server
from justai_memory.mcp.auth import CALLER_KEY, Grant
from memories.admin.base import actor_name
from memories.models import AuditAction, AuditEvent, Tombstone
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def in_the_test_transaction(monkeypatch):
    """A tool hands its thread's database connection back; here the thread is the test's, inside its transaction."""
    monkeypatch.setattr(server, "close_old_connections", lambda: None)


def context(grant: Grant, headers=None) -> SimpleNamespace:
    """What a tool reads of its MCP context: the grant McpAuth put into the request's scope, and the headers."""
    request = SimpleNamespace(scope={CALLER_KEY: grant}, headers=headers or {})
    return SimpleNamespace(request_context=SimpleNamespace(request=request), headers=headers or {})


def test_a_memory_remembered_and_forgotten_through_a_connection_names_it_with_the_speaker_in_the_trail():
    julia, kitchen = PersonFactory(name="Julia"), RoomFactory()
    client = get_application_model().objects.create(
        name="Home Assistant",
        client_type="confidential",
        authorization_grant_type="authorization-code",
        redirect_uris="https://ha.example/cb",
    )
    connection = Connection.objects.create(
        application=client, room=kitchen, speaker=julia, model_location="local", scope=Access.ALL
    )
    ctx = context(Grant(scopes=frozenset(Access.ALL.value.split()), connection=connection))
    remembered = json.loads(server.remember("Der Ersatzschlüssel liegt unter der Fußmatte", ctx))
    memory_id = remembered["id"]
    created = AuditEvent.objects.get(memory_id=memory_id, action=AuditAction.CREATED)
    assert created.actor == f"connection:{connection.pk}/person:{julia.pk}"
    assert actor_name(created.actor) == f"Julia, through Home Assistant → {kitchen.name}"  # the connection by name
    with translation.override("de"):
        assert actor_name(created.actor) == f"Julia, über Home Assistant → {kitchen.name}"

    found = json.loads(server.find_to_forget("Ersatzschlüssel", ctx))
    server.forget(found["token"], True, ctx, memory_ids=[memory_id])
    assert Tombstone.objects.get().forgotten_by_person == julia
    forgotten = AuditEvent.objects.get(memory_id=memory_id, action=AuditAction.FORGOTTEN)
    assert forgotten.actor == f"connection:{connection.pk}/person:{julia.pk}"  # through which client it was forgotten


def test_a_call_with_the_api_token_and_headers_names_the_speaker_alone():
    julia, kitchen = PersonFactory(name="Julia"), RoomFactory()
    headers = {server.ROOM_HEADER: str(kitchen.pk), server.SPEAKER_HEADER: str(julia.pk)}
    ctx = context(Grant(scopes=frozenset(Access.ALL.value.split())), headers)
    remembered = json.loads(server.remember("Der Ersatzschlüssel liegt unter der Fußmatte", ctx))
    created = AuditEvent.objects.get(memory_id=remembered["id"], action=AuditAction.CREATED)
    assert created.actor == f"person:{julia.pk}"
