"""The OAuth endpoints of the running service as shipped (./scripts/run: gunicorn, two uvicorn workers, the edge;
real processes, loopback only; slow): every answer RFC 6749 JSON whatever its method, size or form, and the races
of test_oauth_races.py across two worker processes."""

import socket

import httpx
import pytest

from connections.tests.oauth_races import Household, approval_race, code_race, refresh_race
from justai_memory.tests.test_service import ADMIN_PASSWORD, service  # noqa: F401 (the fixture: ./scripts/run)

pytestmark = pytest.mark.slow

TRIALS = 5


def assert_oauth_json(response: httpx.Response, status: int, error: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"] == "application/json", response.headers
    body = response.json()
    assert isinstance(body["error"], str) and body["error_description"], body
    assert error is None or body["error"] == error, body
    return body


def raw_answer(port: int, request: bytes) -> tuple[int, dict, bytes]:
    """Send ``request`` as is on a new connection; the answer's status, headers and body (HTTP/1.1 via h11)."""
    import h11

    conn = h11.Connection(h11.CLIENT)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        status, headers, body = 0, {}, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(sock.recv(65536))
            elif isinstance(event, h11.Response):
                status, headers = event.status_code, {k.decode(): v.decode() for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                return status, headers, body


def test_every_answer_of_the_oauth_endpoints_is_rfc_6749_json(service):  # noqa: F811
    url = service.url
    for method, path in (("GET", "/oauth/token/"), ("PUT", "/oauth/token/"), ("DELETE", "/oauth/token/")):
        response = httpx.request(method, url(path), timeout=30)
        assert_oauth_json(response, 405, "invalid_request")
        assert response.headers["allow"]
    assert_oauth_json(httpx.get(url("/oauth/revoke/"), timeout=30), 405, "invalid_request")
    assert_oauth_json(httpx.post(url("/oauth/token/?x=1"), data={"grant_type": "refresh_token"}, timeout=30), 400)
    fields = {f"f{i}": "x" for i in range(1001)}
    assert_oauth_json(httpx.post(url("/oauth/token/"), data=fields, timeout=30), 400, "invalid_request")
    device = {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": "x", "client_id": "x"}
    assert_oauth_json(httpx.post(url("/oauth/token/"), data=device, timeout=30), 400, "unsupported_grant_type")
    big = b"grant_type=refresh_token&refresh_token=" + b"x" * 3_000_000
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    for path in ("/oauth/token/", "/oauth/register/"):
        assert_oauth_json(httpx.post(url(path), content=big, headers=headers, timeout=30), 413, "invalid_request")


@pytest.mark.parametrize("size", [10_000, 200_000])
def test_a_long_authorization_url_is_a_json_4xx(service, size):  # noqa: F811
    """10 KB reaches the endpoint (a parameter over 2,048 characters); 200 KB is past what the server reads of a
    head (h11's 16 KiB): refused by the server's protocol, in the same form."""
    target = f"/oauth/authorize/?response_type=code&client_id=x&state={'s' * size}"
    request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\nAccept: application/json\r\n\r\n"
    status, headers, body = raw_answer(service.port, request.encode())
    assert 400 <= status < 500 and headers["content-type"] == "application/json", (status, headers, body[:300])
    answer = httpx.Response(status, headers=headers, content=body)
    assert_oauth_json(answer, status, "invalid_request")
    if size < 16_384:
        return
    # Elsewhere the same refusal is the API's JSON: error and field.
    api = f"GET /internal/v1/health?q={'q' * size} HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n\r\n"
    status, headers, body = raw_answer(service.port, api.encode())
    assert headers["content-type"] == "application/json" and "field" in httpx.Response(status, content=body).json()


def test_races_across_two_worker_processes(service):  # noqa: F811
    household = Household(service.url(""), "admin", ADMIN_PASSWORD)
    choices = {"room": service.room_id, "speaker": "", "model_location": "local", "access": "memory:read"}
    for _ in range(TRIALS):
        refreshed = refresh_race(household, choices)
        assert sorted(refreshed.statuses) == [200, 400] and refreshed.live_tokens == 1, refreshed
        exchanged = code_race(household, choices)
        assert 500 not in exchanged.statuses and exchanged.live_tokens == 0, exchanged
        _approved, client_id = approval_race(household, choices)
        with service.database() as conn:
            live = conn.execute(
                "SELECT count(*) FROM connections_connection c JOIN oauth2_provider_application a "
                "ON a.id = c.application_id WHERE a.client_id = %s AND c.revoked_at IS NULL",
                [client_id],
            ).fetchone()[0]
        assert live == 1
