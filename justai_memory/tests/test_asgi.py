"""The ASGI app in process: which app a path reaches, with which path and root_path; the access log; the MCP gate."""

import asyncio
import logging
import os

import httpx
import pytest

POOL_BEFORE = os.environ.get("DATABASE_POOL")
from justai_memory import asgi  # noqa: E402

TOKEN = "asgi-test-token-0123456789"
METADATA = "http://127.0.0.1/.well-known/oauth-protected-resource/mcp"


@pytest.fixture
def recorded(monkeypatch):
    """The MCP and Django mounts replaced by apps that note the scope they get and answer 204."""
    seen: list[tuple[str, str, str]] = []

    def recorder(name):
        async def app(scope, receive, send):
            seen.append((name, scope["path"], scope["root_path"]))
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        return app

    mcp_route, django_route = asgi.application.routes
    monkeypatch.setattr(mcp_route, "app", recorder("mcp"))
    monkeypatch.setattr(django_route, "app", recorder("django"))
    return seen


def get(path: str, **kwargs) -> httpx.Response:
    async def run():
        transport = httpx.ASGITransport(app=asgi.application, client=("127.0.0.9", 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.post(path, **kwargs)

    return asyncio.run(run())


def test_mcp_and_everything_under_it_reach_the_mcp_app_with_the_full_path_and_root_path(recorded):
    for path in ("/mcp", "/mcp/", "/mcp/messages", "/mcpx", "/", "/internal/v1/recall", "/admin/login/"):
        assert get(path).status_code == 204, path
    assert recorded == [
        ("mcp", "/mcp", "/mcp"),
        ("mcp", "/mcp/", "/mcp"),
        ("mcp", "/mcp/messages", "/mcp"),
        ("django", "/mcpx", ""),
        ("django", "/", ""),
        ("django", "/internal/v1/recall", ""),
        ("django", "/admin/login/", ""),
    ]


def test_one_access_log_line_per_request_without_the_query_string(recorded, caplog):
    with caplog.at_level(logging.INFO, logger="justai_memory.access"):
        get("/admin/memories/memory/?q=the+secret+PIN")
    lines = [r.getMessage() for r in caplog.records if r.name == "justai_memory.access"]
    assert len(lines) == 1 and lines[0].startswith('127.0.0.9 "POST /admin/memories/memory/" 204 ')
    assert "secret" not in lines[0]


@pytest.mark.django_db(transaction=True)  # a token that is not an API token is looked up among the OAuth tokens
def test_the_mcp_gate_answers_host_and_token_in_json(settings):
    settings.INTERNAL_API_TOKENS = [TOKEN]
    for auth, error in (({}, ""), ({"Authorization": "Bearer wrong"}, ', error="invalid_token"')):
        response = get("/mcp", json={}, headers=auth)
        assert response.status_code == 401 and response.json()["field"] == "Authorization"
        # RFC 9728: the challenge names the resource metadata, where an OAuth client finds the authorization server.
        challenge = response.headers["www-authenticate"]
        assert challenge.startswith(f'Bearer resource_metadata="{METADATA}"{error}'), challenge
    foreign = get("/mcp/", json={}, headers={"Host": "evil.example", "Authorization": f"Bearer {TOKEN}"})
    assert foreign.status_code == 400 and foreign.json()["field"] == "Host"
    # Without API tokens the MCP server is still open to OAuth clients: a 401 with the metadata, not closed.
    settings.INTERNAL_API_TOKENS = []
    closed = get("/mcp", json={})
    assert closed.status_code == 401 and METADATA in closed.headers["www-authenticate"]


def test_importing_the_app_into_a_configured_process_leaves_its_environment_alone():
    """The pool flag is for processes the module configures; in the tests it leaked into every process they
    started (a standalone job cluster got a pool through its forks: 'connection in transaction status')."""
    assert os.environ.get("DATABASE_POOL") == POOL_BEFORE
