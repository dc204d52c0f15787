"""The error contract of the internal API: every status is JSON ``{"error", "field"}``, never Django's HTML."""

import json
import logging
import re

import pytest
from django.db import connection
from django.test import Client

from justai_memory.api import memories as memories_api
from memories.models import Memory
from people.tests.factories import RoomFactory

pytestmark = pytest.mark.django_db

POST_ONLY = [
    "/internal/v1/recall",
    "/internal/v1/memories/remember",
    "/internal/v1/memories/find_to_forget",
    "/internal/v1/memories/forget",
    "/internal/v1/memories/observe",
    "/internal/v1/conversations",
    "/internal/v1/conversations/1/turns",
    "/internal/v1/conversations/1/end",
    "/internal/v1/sightings",
    "/internal/v1/events",
]
GET_ONLY = ["/internal/v1/health", "/internal/v1/tools", "/internal/v1/conversations/1/working_memory"]


def _contract(response, status: int, field=None) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error", "field"} and body["error"] and body["field"] == field
    return body


def test_closed_without_tokens_and_401_naming_the_header(client, settings):
    settings.INTERNAL_API_TOKENS = []
    _contract(client.post("/internal/v1/recall", {}, content_type="application/json"), 403)
    settings.INTERNAL_API_TOKENS = ["a-long-enough-token", "another-long-token"]
    for header in ("Bearer another-long-token", "bearer another-long-token "):
        assert client.get("/internal/v1/tools", HTTP_AUTHORIZATION=header).status_code == 200
    for header in ("Bearer another-long-toke", "Token another-long-token", "another-long-token"):
        _contract(client.get("/internal/v1/tools", HTTP_AUTHORIZATION=header), 401, "Authorization")


@pytest.mark.parametrize("path", POST_ONLY)
def test_a_get_on_a_post_endpoint_is_a_json_405_with_allow(api, path):
    response = api.get(path)
    _contract(response, 405)
    assert response["Allow"] == "POST"


@pytest.mark.parametrize("path", GET_ONLY)
def test_a_post_on_a_get_endpoint_is_a_json_405_with_allow(api, path):
    response = api.post(path, {})
    _contract(response, 405)
    assert response["Allow"] == "GET"


@pytest.mark.parametrize(
    "path", ["/internal/v1/nope", "/internal/v1/", "/internal/v1/conversations/abc/turns", "/internal/v1/recall/x"]
)
def test_unknown_paths_are_a_json_404(api, path):
    _contract(api.get(path), 404)
    _contract(api.post(path, {}), 404)


def test_a_validation_error_is_a_400_never_ninjas_422(api):
    room = RoomFactory()
    body = _contract(api.post("/internal/v1/recall", {"query": "x", "room_id": room.pk, "limit": 99}), 400, "limit")
    assert "50" in body["error"]
    body = _contract(api.post("/internal/v1/recall", {"room_id": room.pk}), 400, "query")
    assert body["error"] == "'query' is required."


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_is_a_json_503_and_the_api_recovers(api):
    room = RoomFactory()
    settings_dict = connection.settings_dict
    port = settings_dict["PORT"]
    connection.close()
    settings_dict["PORT"] = "1"  # nothing listens there: connecting raises OperationalError
    try:
        for response in (
            api.post(
                "/internal/v1/recall", {"query": "Wo ist der Schlüssel?", "room_id": room.pk, "model_location": "local"}
            ),
            api.post("/internal/v1/memories/remember", {"content": "Der Schlüssel ist im Flur.", "room_id": room.pk}),
        ):
            _contract(response, 503)
        health = api.get("/internal/v1/health")  # 503 with the report: which component is down
        assert health.status_code == 503 and health.json()["components"]["database"]["ok"] is False
    finally:
        connection.close()
        settings_dict["PORT"] = port
    assert api.get("/internal/v1/health").json()["components"]["database"] == {"ok": True}
    assert not Memory.objects.exists()


def test_an_unexpected_exception_is_a_json_500_whose_id_is_logged_without_content(api, monkeypatch, caplog):
    room = RoomFactory()

    def broken(**kwargs):
        raise RuntimeError(f"Failing row contains ({kwargs['query']})")

    monkeypatch.setattr(memories_api, "memory_recall", broken)
    with caplog.at_level(logging.ERROR, logger="justai_memory.edge.errors"):
        response = api.post(
            "/internal/v1/recall", {"query": "Zebra-Passwort 98765", "room_id": room.pk, "model_location": "local"}
        )
    body = _contract(response, 500)
    [error_id] = re.findall(r"[0-9a-f]{12}", body["error"])
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert error_id in logged and "RuntimeError" in logged and "broken" in logged
    assert "Zebra" not in logged and "Zebra" not in response.content.decode()


def test_an_error_outside_the_api_s_handlers_is_the_same_json_500_with_an_id_that_is_logged(monkeypatch, caplog):
    """handler500 (edge/answers.py) on an API path answers as the API does: one message, an id in the log."""
    from connections.oauth import ResourceMetadataView

    secret = "Zebra-Passwort 98765"

    def broken(self, request, *args, **kwargs):
        raise RuntimeError(f"Failing row contains ({secret})")

    monkeypatch.setattr(ResourceMetadataView, "get", broken)
    with caplog.at_level(logging.ERROR, logger="justai_memory.edge.errors"):
        response = Client(raise_request_exception=False).get("/.well-known/oauth-protected-resource")
    body = _contract(response, 500)
    [error_id] = re.findall(r"[0-9a-f]{12}", body["error"])
    assert body["error"] == f"Internal error {error_id}; the log has the details under this id."
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "justai_memory.edge.errors")
    assert error_id in logged and "RuntimeError" in logged and "broken" in logged and "Zebra" not in logged


def test_a_body_over_a_bound_reads_the_same_at_the_server_s_edge_and_in_the_api(client, api_token):
    import asyncio

    from justai_memory.serving.admission import Admission
    from memories.limits import MAX_BODY_BYTES

    response = client.post(
        "/internal/v1/recall",
        data=b" " * (MAX_BODY_BYTES + 1),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_token}",
    )
    in_api = _contract(response, 413, field="body")["error"]
    sent = []

    async def receive():
        return {"type": "http.request", "body": b" " * (MAX_BODY_BYTES + 1), "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(Admission(running=1, limit=1, wait=0.1, max_body=MAX_BODY_BYTES).serve(None, {}, receive, send))
    at_edge = json.loads(sent[-1]["body"])
    assert sent[0]["status"] == 413 and at_edge == {"error": in_api, "field": "body"}
    assert in_api == f"The request body is larger than {MAX_BODY_BYTES} bytes."


def test_posts_need_no_csrf_token_the_bearer_token_is_the_credential(api_token):
    client = Client(enforce_csrf_checks=True)
    room = RoomFactory()
    response = client.post(
        "/internal/v1/memories/remember",
        {"content": "Der Code für das Gartentor ist 4711.", "room_id": room.pk},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {api_token}",
    )
    assert response.status_code == 201
    unknown = client.post(
        "/internal/v1/nope", {}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {api_token}"
    )
    _contract(unknown, 404)


def test_an_integral_json_number_is_an_id_a_fraction_or_a_string_is_not(api):
    room = RoomFactory()
    assert (
        api.post(
            "/internal/v1/recall",
            {"query": "Schlüssel", "room_id": float(room.pk), "limit": 5.0, "model_location": "local"},
        ).status_code
        == 200
    )
    for bad in (room.pk + 0.5, str(room.pk), True):
        _contract(api.post("/internal/v1/recall", {"query": "Schlüssel", "room_id": bad}), 400, "room_id")


@pytest.mark.django_db(transaction=True)
def test_with_the_database_unreachable_the_admin_is_a_503_page_and_the_api_says_when_to_retry(api, admin_client):
    room = RoomFactory()
    assert admin_client.get("/admin/").status_code == 200
    settings_dict = connection.settings_dict
    port = settings_dict["PORT"]
    connection.close()
    settings_dict["PORT"] = "1"  # nothing listens there: connecting raises OperationalError
    try:
        admin = admin_client.get("/admin/memories/memory/")
        recall = api.post(
            "/internal/v1/recall", {"query": "Wo ist der Schlüssel?", "room_id": room.pk, "model_location": "local"}
        )
    finally:
        connection.close()
        settings_dict["PORT"] = port
    assert admin.status_code == 503 and admin["Content-Type"].startswith("text/html")
    assert admin["Retry-After"] == "5" and b"Database unavailable" in admin.content
    assert b"Traceback" not in admin.content and b"OperationalError" not in admin.content
    _contract(recall, 503)
    assert recall["Retry-After"] == "5"
    assert admin_client.get("/admin/").status_code == 200


def test_a_foreign_host_is_a_json_400_naming_it_on_the_api_and_django_s_page_on_the_admin(client, api_token):
    for path in ("/internal/v1/health", "/internal/v1/nowhere", "/internal/v1/openapi.json"):
        response = client.get(path, HTTP_HOST="evil.example", HTTP_AUTHORIZATION=f"Bearer {api_token}")
        _contract(response, 400, "Host")
    admin = client.get("/admin/login/", HTTP_HOST="evil.example")
    assert admin.status_code == 400 and admin["Content-Type"].startswith("text/html")


def _pool_timeout(pool):
    """What Django raises when its pool times out: its OperationalError from psycopg_pool's PoolTimeout."""
    from django.db import OperationalError
    from psycopg_pool import PoolTimeout

    try:
        try:
            pool.getconn()
        except PoolTimeout as exc:
            raise OperationalError(*exc.args) from exc
    except OperationalError as exc:
        return exc
    raise AssertionError("the pool gave a connection")


def test_a_pool_timeout_is_busy_while_the_database_is_up_and_unreachable_when_it_is_not():
    """A full pool whose every connection is in use times out: busy. A pool that cannot connect times out too: down."""
    from psycopg_pool import ConnectionPool

    from justai_memory.edge.errors import pool_exhausted

    params = {**connection.get_connection_params(), "autocommit": True}
    with ConnectionPool(kwargs=params, min_size=1, max_size=1, timeout=0.3) as full:
        held = full.getconn()
        try:
            assert pool_exhausted(_pool_timeout(full), full)
        finally:
            full.putconn(held)
    down = ConnectionPool(kwargs={**params, "port": 1}, min_size=0, max_size=1, timeout=0.3, open=True)
    try:
        assert not pool_exhausted(_pool_timeout(down), down)
    finally:
        down.close()


def test_busy_is_a_json_503_with_retry_after_logged_as_a_warning(rf, caplog):
    """Not the ERROR django.request writes for a 503: the response is marked logged."""
    from justai_memory.edge.errors import BUSY_TOO_LONG, busy_response

    with caplog.at_level(logging.WARNING):
        response = busy_response(rf.post("/internal/v1/recall"), BUSY_TOO_LONG.format(seconds="5"))
    assert response.status_code == 503 and response["Retry-After"] == "1"
    body = json.loads(response.content)
    assert "busy" in body["error"] and "unreachable" not in body["error"] and body["field"] is None
    assert response._has_been_logged
    assert [r.levelname for r in caplog.records] == ["WARNING"]


@pytest.mark.django_db
def test_a_statement_past_its_time_limit_is_busy_naming_no_internals(settings):
    from django.db import OperationalError, connection

    from justai_memory.edge.errors import database_error_answer

    settings.DATABASE_STATEMENT_TIMEOUT = 0.1
    with pytest.raises(OperationalError) as raised, connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = '100ms'")
        cursor.execute("SELECT pg_sleep(2)")
    message, status, retry_after = database_error_answer(raised.value)
    assert (status, retry_after) == (503, "1") and message.startswith("The server is busy")
    assert "within 0.1 s" in message and "statement" not in message and "cancel" not in message


@pytest.mark.django_db
def test_the_admin_s_pages_run_under_their_own_statement_time_limit(rf, settings):
    """With the pool (web processes): the admin's requests raise their connection's limit, the API's keep it."""
    from django.db import connection
    from django.http import HttpResponse

    from justai_memory.edge.answers import AdminStatementTimeoutMiddleware

    settings.DATABASE_POOL, settings.ADMIN_STATEMENT_TIMEOUT = True, 60
    seen = {}

    def view(request):
        with connection.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            seen[request.path] = cursor.fetchone()[0]
        return HttpResponse()

    middleware = AdminStatementTimeoutMiddleware(view)
    for path in ("/internal/v1/recall", "/admin/memories/memory/"):
        middleware(rf.get(path))
    assert seen == {"/internal/v1/recall": "0", "/admin/memories/memory/": "1min"}


def test_a_foreign_host_is_one_warning_line_without_a_traceback(api_token, caplog):
    """The client's error, not the service's: Django logged an ERROR with the exception's traceback."""
    with caplog.at_level(logging.INFO):
        response = Client().get(
            "/internal/v1/health", HTTP_HOST="evil.example", HTTP_AUTHORIZATION=f"Bearer {api_token}"
        )
    assert response.status_code == 400
    records = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert [(r.levelname, r.exc_info) for r in records] == [("WARNING", None)]
    assert "evil.example" in records[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
