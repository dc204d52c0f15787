"""The ASGI app in process: which app a path reaches, with which path and root_path; the access log; the MCP gate."""

import asyncio
import json
import logging
import os

import httpx
import pytest

POOL_BEFORE = os.environ.get("DATABASE_POOL")
from justai_memory.serving import asgi  # noqa: E402

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


def test_mcp_reaches_the_mcp_app_with_the_full_path_and_root_path_and_nothing_else_does(recorded):
    for path in ("/mcp", "/mcp/", "/mcp/messages", "/mcpx", "/", "/internal/v1/recall", "/admin/login/"):
        assert get(path).status_code == 204, path
    assert recorded == [
        ("mcp", "/mcp", "/mcp"),
        ("mcp", "/mcp/", "/mcp"),
        ("django", "/mcp/messages", ""),
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


def test_an_answer_that_is_not_read_holds_no_place_and_a_static_file_takes_none():
    """Admission(running=1): the first request's answer has started but its client reads nothing (its body's send
    waits): the next runs at once. Ungated requests (static files) run beside a held place, never waiting for one."""
    from justai_memory.serving.admission import Admission

    async def run():
        admission = Admission(running=1, limit=8, wait=0.5)
        unread, ran = asyncio.Event(), []

        async def app(scope, receive, send):
            ran.append(scope["name"])
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"x"})

        async def request(name: str, *, read: bool = True, gated: bool = True):
            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message):
                if message["type"] == "http.response.body" and not read:
                    await unread.wait()  # the client reads nothing: uvicorn's send waits for the buffer to drain

            await admission.serve(app, {"type": "http", "name": name}, receive, send, gated=gated)

        held = asyncio.create_task(request("unread", read=False))
        await asyncio.sleep(0.01)
        async with asyncio.timeout(0.3):  # far below the wait (0.5 s): nobody waited for a place
            await request("next")
        statics = [asyncio.create_task(request(f"static {i}", read=False, gated=False)) for i in range(3)]
        await asyncio.sleep(0.01)
        assert (admission.running, admission.admitted) == (0, 0)  # the unread answer and three static files: none
        async with asyncio.timeout(0.3):
            await request("after the files")
        unread.set()
        await asyncio.gather(held, *statics)
        assert ran[:2] == ["unread", "next"] and (admission.running, admission.admitted) == (0, 0)

    asyncio.run(run())


def test_admission_runs_one_per_pooled_connection_queues_the_rest_in_order_and_says_busy_past_its_bounds():
    """Admission(running=1, limit=3, wait=0.5): the first runs, two wait in order, the fourth is told "busy" at once;
    a waiting one that gets no turn within the wait is told "busy" too; a body is read before anything counts."""
    from justai_memory.serving.admission import Admission

    async def run():
        admission = Admission(running=1, limit=3, wait=0.5)
        release, order, answers = asyncio.Event(), [], {}

        async def app(scope, receive, send):
            message = await receive()
            order.append(message["body"])
            if message["body"] == b"first":
                await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        async def request(name: bytes):
            sent = []

            async def receive():
                return {"type": "http.request", "body": name, "more_body": False}

            async def send(message):
                sent.append(message)

            await admission.serve(app, {"type": "http"}, receive, send)
            answers[name] = (sent[0]["status"], sent[-1].get("body", b""))

        first = asyncio.create_task(request(b"first"))
        await asyncio.sleep(0)
        second, third = asyncio.create_task(request(b"second")), asyncio.create_task(request(b"third"))
        await asyncio.sleep(0)
        await request(b"fourth")  # 3 admitted: at once
        assert answers[b"fourth"][0] == 503 and b"more than 3 requests at once" in answers[b"fourth"][1]
        await asyncio.sleep(0.6)  # the wait passes for the second and the third
        release.set()
        await asyncio.gather(first, second, third)
        assert order == [b"first"]
        assert answers[b"second"][0] == answers[b"third"][0] == 503
        assert b"no database connection became free within 0.5 s" in answers[b"second"][1]
        # Freed: the next ones run, one after the other, in order.
        release.clear()
        first = asyncio.create_task(request(b"first"))
        await asyncio.sleep(0)
        later = [asyncio.create_task(request(name)) for name in (b"a", b"b")]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, *later)
        assert order == [b"first", b"first", b"a", b"b"]
        assert admission.running == admission.admitted == 0 and not admission.waiting

    asyncio.run(run())


def test_busy_on_an_oauth_endpoint_is_rfc_6749_json_and_elsewhere_the_api_s():
    """Admission(running=1, limit=1): a second request while the first runs is told "busy" at once, in the form of
    its path: ``temporarily_unavailable`` with a description on /oauth/, the API's ``error`` and ``field`` elsewhere."""
    from justai_memory.serving.admission import Admission

    async def run():
        admission, release = Admission(running=1, limit=1, wait=0.5), asyncio.Event()

        async def app(scope, receive, send):
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        async def request(path: str) -> list[dict]:
            sent = []

            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message):
                sent.append(message)

            await admission.serve(app, {"type": "http", "path": path}, receive, send)
            return sent

        first = asyncio.create_task(request("/internal/v1/recall"))
        await asyncio.sleep(0)
        oauth, api = await request("/oauth/token/"), await request("/internal/v1/recall")
        release.set()
        await first
        for sent in (oauth, api):
            assert sent[0]["status"] == 503 and dict(sent[0]["headers"])[b"content-type"] == b"application/json"
        body = json.loads(oauth[-1]["body"])
        assert body["error"] == "temporarily_unavailable" and "more than 1 requests" in body["error_description"]
        assert set(json.loads(api[-1]["body"])) == {"error", "field"}

    asyncio.run(run())


@pytest.mark.django_db
def test_a_worker_loads_what_requests_need_before_it_takes_the_first():
    """The lifespan's warm: the language detector built and loaded, wordfreq's lists, dateparser's tables, the keyword
    statistics; each was loaded by the first request that needed it (10-29 s for the first remember)."""
    from memories import digests, languages
    from memories.selectors import dates, keywords
    from people.tests.factories import PersonFactory

    PersonFactory(preferred_language="de")
    PersonFactory(preferred_language="it")
    for cache in (languages._detector, digests._zipf_table, dates._parser):
        cache.cache_clear()
    keywords.forget_statistics()
    took = asgi.warm()
    assert set(took) == {
        "urls and translations",
        "embedder",
        "language detector",
        "word frequencies",
        "dates",
        "keyword statistics",
    }
    assert [info.currsize for info in (languages._detector.cache_info(), digests._zipf_table.cache_info())] == [1, 1]
    assert languages._detector(frozenset({"de", "it"}), "high") is not None
    assert dates._parser.cache_info().currsize >= 1
    assert keywords._statistics


def test_a_path_with_a_line_feed_is_the_api_s_json_404():
    """Mount("/")'s pattern stops at a line feed: Starlette answered its own text/plain 404."""

    async def run():
        transport = httpx.ASGITransport(app=asgi.application, client=("127.0.0.9", 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return [await client.get(path) for path in ("/internal/v1/x%0A", "/internal/v1/health%0Ax")]

    for response in asyncio.run(run()):
        assert response.status_code == 404 and response.headers["content-type"] == "application/json"
        assert response.json()["field"] is None and "No such endpoint" in response.json()["error"]


NOWHERE = ("/mcp%0A", "/mcp/x", "/mcp/x%0A", "/mcpx", "/mcp%0Ax", "/nowhere", "/nowhere%0A", "/static/nowhere.js")


def test_every_path_outside_the_admin_s_pages_is_a_json_404(api_token):
    """The MCP endpoint's neighbours and any other unknown path: a program's client reads JSON, never an HTML page."""
    headers = {"Authorization": f"Bearer {api_token}"}

    async def run():
        transport = httpx.ASGITransport(app=asgi.application, client=("127.0.0.9", 1234))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers) as client:
            return {path: await client.get(path) for path in NOWHERE}

    for path, response in asyncio.run(run()).items():
        assert response.status_code == 404, (path, response.status_code, response.text[:200])
        assert response.headers["content-type"] == "application/json", (path, response.text[:200])
        assert response.json()["field"] is None, path


def test_a_worker_builds_the_url_tables_and_catalogues_of_every_language_before_the_first_request():
    """Imported and built on the first request otherwise: ~1 s for the first call of the worker that did not answer
    the health check (the served first remember or forget, 3-4x the tenth)."""
    from django.conf import settings
    from django.urls import clear_url_caches, get_resolver
    from django.utils.translation import trans_real

    clear_url_caches()
    trans_real._translations.clear()
    asgi.WARM_STEPS["urls and translations"]()
    languages = {code for code, _name in settings.LANGUAGES}
    assert set(get_resolver()._reverse_dict) >= languages
    assert set(trans_real._translations) >= languages
