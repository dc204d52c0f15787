"""JSON at the edge of the running service (./scripts/run, real processes, loopback only; slow).

One web worker that runs two requests at once (a pool of two connections) and admits three: a foreign
Host, slow clients, overload and a stopped database, each answered with a status and body a client
can act on, never Django's or uvicorn's default pages.
"""

import json
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from justai_memory.tests.test_service import ADMIN_PASSWORD, TOKEN, Service

pytestmark = pytest.mark.slow

RUNNING, LIMIT, QUEUE_TIMEOUT = 2, 3, 2
READ_TIMEOUT = 4
STATEMENT_TIMEOUT = 12  # long enough for the held recalls of the admission drill below
SEND_TIMEOUT = 15  # every unread answer of the drill below is still held while the probes run


class EdgeService(Service):
    def env(self) -> dict:
        return {
            **super().env(),
            "WEB_WORKERS": "1",
            "WEB_WORKER_CONNECTIONS": str(LIMIT),
            "DATABASE_POOL_MAX_SIZE": str(RUNNING),
            "WEB_QUEUE_TIMEOUT": str(QUEUE_TIMEOUT),
            "WEB_READ_TIMEOUT": str(READ_TIMEOUT),
            "WEB_STATEMENT_TIMEOUT": str(STATEMENT_TIMEOUT),
            "WEB_SEND_TIMEOUT": str(SEND_TIMEOUT),
        }


@pytest.fixture(scope="module")
def service():
    data_dir = Path(tempfile.mkdtemp(prefix="justai-edge-test-"))
    service = EdgeService(data_dir / "data", data_dir / "service.log")
    service.start()
    service.manage("add_room", "Kitchen")
    with service.database() as conn:
        service.room_id = conn.execute("SELECT id FROM people_room WHERE name = 'Kitchen'").fetchone()[0]
    yield service
    if service.process.poll() is None:
        service.stop(signal.SIGTERM)
    shutil.rmtree(data_dir, ignore_errors=True)


def recall_body(service) -> bytes:
    body = {"query": "Wo ist der Schlüssel?", "room_id": service.room_id, "model_location": "local"}
    return json.dumps(body).encode()


def test_a_foreign_host_is_a_json_400_naming_it_on_the_api(service):
    for path in ("/internal/v1/health", "/internal/v1/recall", "/internal/v1/docs"):
        response = httpx.get(
            service.url(path), headers={"Host": "evil.example", "Authorization": f"Bearer {TOKEN}"}, timeout=10
        )
        assert response.status_code == 400, (path, response.text[:300])
        assert response.headers["content-type"] == "application/json", path
        assert response.json()["field"] == "Host"
    admin = httpx.get(service.url("/admin/login/"), headers={"Host": "evil.example"}, timeout=10)
    assert admin.status_code == 400 and admin.headers["content-type"].startswith("text/html")


def slow_upload(service) -> socket.socket:
    """A recall whose head and first 10 body bytes are sent, the rest never."""
    body = recall_body(service)
    sock = socket.create_connection(("127.0.0.1", service.port), timeout=30)
    head = (
        f"POST /internal/v1/recall HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body[:10])
    return sock


def answer_of(sock: socket.socket) -> bytes:
    """All the server sends on ``sock`` until it closes the connection."""
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def answer_status(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, data
        data += chunk
    return int(data.split(b" ", 2)[1])


def test_slow_uploads_and_slow_heads_hold_no_place_and_are_cut_at_the_read_deadline(service):
    uploads = [slow_upload(service) for _ in range(128)]
    heads = [socket.create_connection(("127.0.0.1", service.port), timeout=30) for _ in range(16)]
    try:
        for sock in heads:
            sock.sendall(b"GET /internal/v1/health HTTP/1.1\r\nHost: 127")
        started = time.monotonic()
        while time.monotonic() - started < READ_TIMEOUT - 2:  # while every upload is held
            began = time.monotonic()
            health = service.health()
            health_seconds = time.monotonic() - began
            began = time.monotonic()
            recall = service.api("POST", "/internal/v1/recall", json.loads(recall_body(service)))
            recall_seconds = time.monotonic() - began
            assert health is not None and health.status_code == 200, health and health.text[:300]
            assert recall.status_code == 200, recall.text[:300]
            assert health_seconds < 1 and recall_seconds < 1, (health_seconds, recall_seconds)
        for sock in uploads:  # past the deadline: a JSON 408 naming the body, and the connection closed
            answer = answer_of(sock)
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
            assert b"application/json" in answer and answer.endswith(b'"field": "body"}'), answer[-300:]
        for sock in heads:  # a head that never ends: closed
            assert answer_of(sock) == b""
    finally:
        for sock in uploads + heads:
            sock.close()


BIG_STATIC = "/static/ninja/redoc.standalone.js.map"  # 3.3 MB


def unread(service, path: str, headers: str = "") -> socket.socket:
    """A GET of ``path`` from a client with a 1 KB receive buffer that never reads its answer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.connect(("127.0.0.1", service.port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n{headers}\r\n".encode())
    return sock


def big_export(service) -> str:
    """The path of a person's export of ~3 MB: one memory remembered, copied 2,000 times with longer text."""
    service.manage("add_person", "Julia", "--language", "de")
    with service.database() as conn:
        person = conn.execute("SELECT id FROM people_person WHERE name = 'Julia'").fetchone()[0]
    text = "Der Ersatzschlüssel für den Keller liegt in der blauen Dose im Flur"
    body = {"content": text, "room_id": service.room_id, "speaker_id": person}
    assert service.api("POST", "/internal/v1/memories/remember", body).status_code == 201
    with service.database() as conn:
        columns = [
            name
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories_memory' "
                "AND is_generated = 'NEVER' AND column_name NOT IN ('id', 'content') ORDER BY ordinal_position"
            )
        ]
        listed = ", ".join(columns)
        conn.execute(
            f"INSERT INTO memories_memory (content, {listed}) SELECT content || ' ' || g || repeat(' Eintrag', 150), "
            f"{listed} FROM memories_memory, generate_series(1, 2000) AS g WHERE content = %s",
            [text],
        )
    return f"/internal/v1/people/{person}/export"


def unsent(port: int, clients: set[int]) -> dict[int, int]:
    """Bytes in the send queue of the server's side of each connection from one of ``clients`` (/proc/net/tcp)."""
    queued = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(address.split(":")[1], 16) for address in fields[1:3])
        if local == port and remote in clients:
            queued[remote] = int(fields[4].split(":")[0], 16)
    return queued


def test_answers_that_are_never_read_hold_no_place_and_are_dropped_at_the_send_deadline(service):
    """16 clients that never read a 3.3 MB static file and 8 that never read a 3 MB export, 24 unread answers against
    a worker that admits 3 at once: each is answered; then /health and recall answer 200 within 1 s; past
    WEB_SEND_TIMEOUT the server holds none of their connections."""
    export = big_export(service)
    worker = service.child("gunicorn").children()[0]
    readers = []
    try:
        # One after the other, each once its answer has started (its bytes wait in the send queue): 24 unread
        # answers, more than the worker admits at once (LIMIT), so none may hold a place or count as admitted.
        for path, headers in [(BIG_STATIC, "")] * 16 + [(export, f"Authorization: Bearer {TOKEN}\r\n")] * 8:
            readers.append(unread(service, path, headers))
            client, deadline = readers[-1].getsockname()[1], time.monotonic() + 30
            while not unsent(service.port, {client}).get(client):
                assert time.monotonic() < deadline, f"answer {len(readers)} did not start"
                time.sleep(0.02)
        ours = {sock.getsockname()[1] for sock in readers}
        started = time.monotonic()
        while time.monotonic() - started < SEND_TIMEOUT + 3:
            for probe in (
                lambda: service.health(),
                lambda: service.api("POST", "/internal/v1/recall", json.loads(recall_body(service))),
            ):
                began = time.monotonic()
                answer = probe()
                seconds = time.monotonic() - began
                assert answer is not None and answer.status_code == 200, answer and answer.text[:300]
                assert seconds < 1, seconds
        deadline = time.monotonic() + 10
        while held := [c for c in worker.net_connections() if c.raddr and c.raddr.port in ours]:
            assert time.monotonic() < deadline, f"{len(held)} unread answers still held"
            time.sleep(0.2)
    finally:
        for sock in readers:
            sock.close()


def busy(response: httpx.Response) -> bool:
    """A JSON 503 "busy" with Retry-After: 1."""
    return (
        response.status_code == 503
        and response.headers["content-type"] == "application/json"
        and response.headers.get("retry-after") == "1"
        and response.json()["field"] is None
        and "busy" in response.json()["error"]
    )


def test_past_the_pool_requests_wait_their_turn_then_are_told_busy_never_database_unreachable(service):
    """Two recalls held running (the memories table locked, both seen waiting for the lock): a third waits for a
    connection QUEUE_TIMEOUT s and is told "busy"; with LIMIT admitted, the next is told "busy" at once; the held
    ones still finish. The database is up all along: nobody hears that it is unreachable."""
    body = json.loads(recall_body(service))
    log_before = service.log.stat().st_size
    with service.database() as lock, ThreadPoolExecutor(8) as pool:
        lock.execute("BEGIN")
        lock.execute("LOCK TABLE memories_memory IN ACCESS EXCLUSIVE MODE")
        held = [pool.submit(service.api, "POST", "/internal/v1/recall", body, 60) for _ in range(RUNNING)]
        waiting = 0
        with service.database() as watch:
            deadline = time.monotonic() + 30
            while waiting < RUNNING and time.monotonic() < deadline:
                waiting = watch.execute(
                    "SELECT count(*) FROM pg_locks WHERE relation = 'memories_memory'::regclass AND NOT granted"
                ).fetchone()[0]
        assert waiting == RUNNING
        queued = service.api("POST", "/internal/v1/recall", body, timeout=30)  # waits its turn, then busy
        assert busy(queued) and "no database connection became free" in queued.json()["error"], queued.text[:300]
        # LIMIT admitted: RUNNING held and one waiting; probes until one is told "busy" at once. Each round sends a
        # waiter of its own first: on a loaded machine a single one could arrive after the probe, or leave (told
        # busy after QUEUE_TIMEOUT) before the next probe, and a probe alone only ever waits its turn.
        deadline = time.monotonic() + 30
        while True:
            pool.submit(service.api, "POST", "/internal/v1/recall", body, 30)
            time.sleep(0.2)  # not synchronisation: a head start for the waiter, whatever the outcome the loop retries
            probe = service.api("POST", "/internal/v1/recall", body, timeout=30)
            if "requests at once" in probe.text or time.monotonic() > deadline:
                break
        lock.execute("COMMIT")
        assert busy(probe) and "more than 3 requests at once" in probe.json()["error"], probe.text[:300]
        assert [future.result().status_code for future in held] == [200] * RUNNING
    assert service.api("POST", "/internal/v1/recall", body).status_code == 200
    written = service.log.read_bytes()[log_before:].decode(errors="replace")
    assert '"POST /internal/v1/recall" 503' in written  # in the access log too
    assert "unreachable" not in written and " ERROR " not in written, written[-3000:]


def test_a_recall_past_its_statement_time_limit_is_busy_and_frees_its_place(service):
    """The memories table locked: each running recall is told "busy" at WEB_STATEMENT_TIMEOUT, naming no internals,
    and its place is free: the next recall runs at once (and is told the same), none waits for a place."""
    body = json.loads(recall_body(service))
    log_before = service.log.stat().st_size
    with service.database() as lock:
        lock.execute("BEGIN")
        lock.execute("LOCK TABLE memories_memory IN ACCESS EXCLUSIVE MODE")
        began = time.monotonic()
        with ThreadPoolExecutor(RUNNING) as pool:
            held = list(pool.map(lambda _: service.api("POST", "/internal/v1/recall", body, 60), range(RUNNING)))
        held_seconds = time.monotonic() - began
        began = time.monotonic()
        after = service.api("POST", "/internal/v1/recall", body, timeout=60)
        after_seconds = time.monotonic() - began
        lock.execute("ROLLBACK")
    for answer in [*held, after]:
        assert busy(answer) and f"did not finish within {STATEMENT_TIMEOUT} s" in answer.json()["error"], answer.text
        assert not re.search(r"statement|cancel|lock|psycopg|SQL", answer.text, re.IGNORECASE), answer.text
    assert STATEMENT_TIMEOUT - 1 < held_seconds < STATEMENT_TIMEOUT + 5, held_seconds
    assert STATEMENT_TIMEOUT - 1 < after_seconds < STATEMENT_TIMEOUT + 5, after_seconds  # ran at once, no wait
    began = time.monotonic()
    assert service.api("POST", "/internal/v1/recall", body).status_code == 200
    assert service.health().status_code == 200 and time.monotonic() - began < 2
    written = service.log.read_bytes()[log_before:].decode(errors="replace")
    # A scheduled job that waited for the lock past its Q_TIMEOUT (20 s here) is the cluster's ERROR, not the web's.
    web_errors = [line for line in written.splitlines() if " ERROR " in line and "django-q" not in line]
    assert not web_errors, web_errors
    assert "unreachable" not in written, [line for line in written.splitlines() if "unreachable" in line]


def test_a_burst_of_clients_gets_answers_or_json_503s_only(service):
    """12 clients, 5 recalls each, against a limit of 3: every answer is a 200 or a JSON 503 with Retry-After."""
    answers: list[tuple[int, str, str | None]] = []

    def client():
        with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            for _ in range(5):
                response = http.post(service.url("/internal/v1/recall"), content=recall_body(service))
                answers.append(
                    (response.status_code, response.headers["content-type"], response.headers.get("retry-after"))
                )

    threads = [threading.Thread(target=client) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(answers) == 60
    assert {a for a in answers if a[0] != 200} <= {(503, "application/json", "1")}, set(answers)
    assert any(a[0] == 200 for a in answers)


def test_with_the_database_down_the_admin_is_a_503_page_and_the_api_a_json_503(service):
    with httpx.Client(base_url=service.url(""), timeout=30) as browser:
        login = browser.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        answer = browser.post(
            "/admin/login/",
            data={"username": "admin", "password": ADMIN_PASSWORD, "csrfmiddlewaretoken": token, "next": "/admin/"},
        )
        assert answer.status_code == 302, answer.text[:500]
        assert browser.get("/admin/").status_code == 200
        # Hold the supervisor so that the database stays down while we look at the service.
        os.kill(service.pid, signal.SIGSTOP)
        try:
            os.kill(service.postmaster_pid(), signal.SIGKILL)
            time.sleep(1)
            began = time.monotonic()
            health = service.health()
            health_seconds = time.monotonic() - began
            admin = browser.get("/admin/")
            api = service.api("POST", "/internal/v1/recall", json.loads(recall_body(service)), timeout=30)
        finally:
            os.kill(service.pid, signal.SIGCONT)
        assert admin.status_code == 503, admin.text[:500]
        assert admin.headers["content-type"].startswith("text/html") and admin.headers["retry-after"] == "5"
        assert "Database unavailable" in admin.text and "Traceback" not in admin.text
        assert api.status_code == 503 and api.headers["content-type"] == "application/json"
        assert api.headers["retry-after"] == "5" and api.json()["field"] is None
        # The health check does not wait the pool's timeout (5 s) for a connection that cannot be made.
        assert health is not None and health.status_code == 503, health and health.text[:300]
        assert health.json()["components"]["database"]["ok"] is False and health_seconds < 5, health_seconds
        service.wait_healthy(timeout=60)
        assert browser.get("/admin/").status_code == 200


def test_proxy_headers_are_trusted_only_from_configured_proxies(service):
    """FORWARDED_ALLOW_IPS is empty by default: a local client cannot set the client address the access log shows."""
    log_before = service.log.stat().st_size
    response = httpx.get(
        service.url("/internal/v1/health"),
        headers={"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "203.0.113.66", "X-Forwarded-Proto": "https"},
        timeout=10,
    )
    assert response.status_code == 200
    deadline = time.monotonic() + 10
    while '"GET /internal/v1/health" 200' not in (written := service.log.read_bytes()[log_before:].decode()):
        assert time.monotonic() < deadline, written
    assert "203.0.113.66" not in written and '127.0.0.1 "GET /internal/v1/health" 200' in written, written
