"""The service as ./scripts/run starts it, with real processes: faults, signals, logs (slow; loopback only).

One service (module fixture) on a temporary data dir serves the fault drills in order, then is
stopped with SIGTERM; a second start on the same data dir, in the background of a shell, is
stopped with SIGINT.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote, quote_plus

import httpx
import psutil
import psycopg
import pytest
from django.urls import reverse

from transcripts.tests.fake_llm import FakeLLM, extraction_answer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "service-test-token-0123456789"
ADMIN_PASSWORD = "service-test-admin-pass"
SECRET = "Zebra-Passwort 98765"
STOP_LIMIT = 15.0
WEB_WORKERS, POOL_MAX_SIZE, Q_WORKERS = 2, 4, 1
# A dead worker's job is re-delivered Q_RETRY s after it was taken. Q_TIMEOUT leaves room for a restarted cluster's
# first run, which loads the language detector (3-10 s on a loaded machine): at 6 s such a run was killed.
Q_TIMEOUT, Q_RETRY = 20, 25


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """``./scripts/run`` on ``data_dir``, its output in ``log``."""

    def __init__(self, data_dir: Path, log: Path):
        self.data_dir, self.log, self.port, self.llm_port = data_dir, log, free_port(), free_port()
        self.process: subprocess.Popen | None = None
        self.pid: int | None = None

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_", "DATABASE_", "EMBEDDED_"))}
        env.update(
            JUSTAI_DATA_DIR=str(self.data_dir),
            JUSTAI_PORT=str(self.port),
            JUSTAI_ADMIN_PASSWORD=ADMIN_PASSWORD,
            INTERNAL_API_TOKENS=TOKEN,
            MEMORY_EMBEDDER="hash",
            EMBEDDED_DB_SHARED_BUFFERS="64MB",
            WEB_WORKERS=str(WEB_WORKERS),
            DATABASE_POOL_MAX_SIZE=str(POOL_MAX_SIZE),
            Q_WORKERS=str(Q_WORKERS),
            Q_TIMEOUT=str(Q_TIMEOUT),
            Q_RETRY=str(Q_RETRY),
            STOP_TIMEOUT="8",
            AI_MEMORY_PROVIDER="custom",
            # Nothing listens there but during the extraction drill (its fake LLM).
            AI_MEMORY_BASE_URL=f"http://127.0.0.1:{self.llm_port}/v1",
            AI_MEMORY_MODEL="none",
        )
        return env

    def start(self, *, background_of_a_shell: bool = False) -> None:
        out = self.log.open("ab")
        if background_of_a_shell:  # bash ignores SIGINT in what it starts with '&' (no job control)
            pidfile = self.data_dir / "run.pid"
            self.process = subprocess.Popen(
                ["bash", "-c", f"./scripts/run & echo $! > {pidfile}; wait"],
                cwd=ROOT,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            deadline = time.monotonic() + 10
            while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.pid = int(pidfile.read_text())
        else:
            self.process = subprocess.Popen(
                [str(ROOT / "scripts" / "run")],
                cwd=ROOT,
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.pid = self.process.pid
        self.wait_healthy(timeout=120)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 10) -> httpx.Response:
        return httpx.request(
            method,
            self.url(path),
            json=body,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout=timeout,
        )

    def health(self) -> httpx.Response | None:
        try:
            return self.api("GET", "/internal/v1/health", timeout=10)
        except httpx.HTTPError:
            return None

    def wait_healthy(self, *, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            response = self.health()
            if response is not None and response.status_code == 200:
                return response.json()
            time.sleep(0.3)
        raise AssertionError(
            f"not healthy after {timeout}s: {response and response.text}\n{self.log.read_text()[-3000:]}"
        )

    def database(self) -> psycopg.Connection:
        return psycopg.connect(
            host=str(self.data_dir / "postgres"), user="postgres", dbname="justai_memory", autocommit=True
        )

    def manage(self, *args: str) -> str:
        env = {
            **self.env(),
            "DATABASE_URL": f"postgresql://postgres@{quote(str(self.data_dir / 'postgres'), safe='')}/justai_memory",
        }
        result = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "python"), "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def postmaster_pid(self) -> int:
        return int((self.data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[0])

    def child(self, marker: str) -> psutil.Process:
        """The supervisor's direct child whose command line contains ``marker``."""
        for child in psutil.Process(self.pid).children():
            if marker in " ".join(child.cmdline()):
                return child
        raise AssertionError(f"no child {marker!r}")

    def tree(self) -> list[psutil.Process]:
        """The supervisor's descendants and the postmaster with its backends (and the supervisor unless it is ours)."""
        supervisor = psutil.Process(self.pid)
        postmaster = psutil.Process(self.postmaster_pid())
        processes = [*supervisor.children(recursive=True), postmaster, *postmaster.children(recursive=True)]
        return processes if self.pid == self.process.pid else [supervisor, *processes]

    def stop(self, signum: int) -> tuple[float, int]:
        """Send ``signum`` to the supervisor; (seconds until every process of the tree is gone, exit code)."""
        tree = self.tree()
        started = time.monotonic()
        os.kill(self.pid, signum)
        code = self.process.wait(STOP_LIMIT + 5)  # the supervisor, or the shell that waits for it
        _, alive = psutil.wait_procs(tree, timeout=max(0.1, STOP_LIMIT + 5 - (time.monotonic() - started)))
        elapsed = time.monotonic() - started
        assert not alive, f"still running: {[p.pid for p in alive]}"
        return elapsed, code


@pytest.fixture(scope="module")
def service():
    # Not pytest's tmp_path: concurrent pytest sessions of the same user rotate those away.
    data_dir = Path(tempfile.mkdtemp(prefix="justai-service-test-"))
    service = Service(data_dir / "data", data_dir / "service.log")
    service.start()
    service.manage("add_room", "Kitchen")
    with service.database() as conn:
        service.room_id = conn.execute("SELECT id FROM people_room WHERE name = 'Kitchen'").fetchone()[0]
    yield service
    if service.process.poll() is None:
        service.stop(signal.SIGTERM)
    shutil.rmtree(data_dir, ignore_errors=True)


def remember(service: Service, text: str) -> httpx.Response:
    return service.api(
        "POST", "/internal/v1/memories/remember", {"content": text, "room_id": service.room_id}, timeout=30
    )


def test_it_serves_health_static_files_and_redirects_to_the_admin(service):
    body = service.wait_healthy(timeout=30)
    assert {name: part["ok"] for name, part in body["components"].items()} == {
        "database": True,
        "embedder": True,
        "cluster": True,
        "extraction": True,
        "llm": False,  # nothing listens at the configured provider: reported, not fatal
    }
    assert httpx.get(service.url("/static/admin/css/base.css")).status_code == 200
    root = httpx.get(service.url("/"))
    assert root.status_code == 302 and root.headers["location"] == "/admin/"


def sessions_opened(conn: psycopg.Connection) -> int:
    """PostgreSQL's count of the sessions ever opened to the service's database."""
    return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = 'justai_memory'").fetchone()[0]


def client_connections(conn: psycopg.Connection) -> int:
    return conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'justai_memory' AND backend_type = 'client backend'"
    ).fetchone()[0]


def test_the_idle_job_cluster_keeps_its_connections(service):
    """Its processes save their status every 0.5 s; closing the connection after each opened ~5 sessions a second."""
    service.wait_healthy(timeout=30)
    with service.database() as conn:
        before = sessions_opened(conn)
        time.sleep(10)  # the window measured, idle
        opened = sessions_opened(conn) - before
    assert opened <= 3, f"{opened} sessions opened in 10 idle seconds"


def test_web_workers_borrow_connections_from_their_pool(service):
    """docs/serving.md: web sessions <= WEB_WORKERS x DATABASE_POOL_MAX_SIZE, however many requests; the peak within the bound."""
    recall = {"query": "Wo ist der Schluessel?", "room_id": service.room_id, "limit": 5, "model_location": "local"}
    cluster = service.child("qcluster")
    group = os.getpgid(cluster.pid)
    os.killpg(group, signal.SIGSTOP)  # the cluster opens and closes a session per status save: hold it
    try:
        with service.database() as conn:
            before = sessions_opened(conn)
            with httpx.Client(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client:
                for _ in range(150):
                    assert client.post(service.url("/internal/v1/recall"), json=recall).status_code == 200
            sequential = sessions_opened(conn) - before

            peak, stop = [0], threading.Event()

            def sample():
                with service.database() as sampler:
                    while not stop.is_set():
                        peak[0] = max(peak[0], client_connections(sampler))
                        time.sleep(0.02)

            def load(_):  # 16 clients, each a new connection per request, 15 requests
                return [
                    httpx.post(service.url("/internal/v1/recall"), json=recall, headers=service_auth(), timeout=60)
                    for _ in range(15)
                ]

            sampler = threading.Thread(target=sample)
            sampler.start()
            with ThreadPoolExecutor(16) as pool:
                statuses = [r.status_code for rs in pool.map(load, range(16)) for r in rs]
            stop.set()
            sampler.join(10)
            total = sessions_opened(conn) - before
    finally:
        os.killpg(group, signal.SIGCONT)
    assert statuses == [200] * 16 * 15
    pools = WEB_WORKERS * POOL_MAX_SIZE
    # The web workers' sessions: at most their pools' (150 sequential requests opened 150 before the pool).
    assert sequential <= pools, f"{sequential} sessions for 150 sequential requests"
    assert total <= pools + 1, f"{total} sessions for 390 requests (+1: the sampler)"
    # The bound of docs/serving.md: the pools, the cluster's processes (Q_WORKERS + sentinel, pusher,
    # monitor, main), this test's two connections.
    assert peak[0] <= pools + Q_WORKERS + 4 + 2, f"peak {peak[0]} connections"


def test_100_clients_at_once_below_the_documented_capacity_see_no_error(service):
    """docs/serving.md: each worker admits WEB_WORKER_CONNECTIONS (128) requests at once, running DATABASE_POOL_MAX_SIZE
    of them and queueing the rest, so 100 clients, however the kernel spreads them over the workers, get answers."""
    recall = {"query": "Wo ist der Schluessel?", "room_id": service.room_id, "limit": 5, "model_location": "local"}
    start = threading.Barrier(100)

    def client(_):
        with httpx.Client(headers=service_auth(), timeout=60) as http:
            start.wait(30)
            return [http.post(service.url("/internal/v1/recall"), json=recall) for _ in range(3)]

    log_before = service.log.stat().st_size
    with ThreadPoolExecutor(100) as pool:
        answers = [r for rs in pool.map(client, range(100)) for r in rs]
    assert [r.status_code for r in answers] == [200] * 300, {(r.status_code, r.text[:200]) for r in answers}
    with service.log.open("rb") as log:
        log.seek(log_before)
        written = log.read().decode(errors="replace")
    assert "unreachable" not in written and " ERROR " not in written, written[-3000:]


def test_a_second_run_on_the_same_data_exits_at_once_naming_the_running_instance(service):
    """It touches nothing of the first: no database started or stopped, no children; the first serves on."""
    children = {child.pid for child in psutil.Process(service.pid).children()}
    postmaster = service.postmaster_pid()
    log_before = service.log.stat().st_size
    second = subprocess.Popen(
        [str(ROOT / "scripts" / "run")], cwd=ROOT, env=service.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        output, _ = second.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        second.terminate()
        output, _ = second.communicate(timeout=30)
        raise AssertionError(f"a second instance runs: {output.decode()[-3000:]}") from None
    assert second.returncode == 1, output.decode()
    message = output.decode().strip().splitlines()[-1]
    assert message.startswith("error: another instance") and f"(pid {service.pid})" in message, output.decode()
    assert str(service.data_dir) in message, message
    assert service.postmaster_pid() == postmaster
    assert {child.pid for child in psutil.Process(service.pid).children()} == children
    assert service.health().status_code == 200
    assert "database st" not in service.log.read_bytes()[log_before:].decode(errors="replace")


def test_a_port_in_use_is_refused_before_anything_starts():
    """One line and exit 1 at once: no database, no children; the program on the port keeps it."""
    data_dir = Path(tempfile.mkdtemp(prefix="justai-port-test-"))
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", 0))
            squatter.listen()
            second = Service(data_dir / "data", data_dir / "service.log")
            second.port = squatter.getsockname()[1]
            began = time.monotonic()
            result = subprocess.run(
                [str(ROOT / "scripts" / "run")], cwd=ROOT, env=second.env(), capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 1, result.stdout + result.stderr
            assert time.monotonic() - began < 15
            assert result.stderr.strip().splitlines() == [
                f"error: port {second.port} on 127.0.0.1 is in use (Address already in use): another program or "
                "installation listens there; stop it, or set JUSTAI_PORT to a free port"
            ], result.stderr
            assert "serving on" not in result.stdout + result.stderr
            assert not (data_dir / "data" / "postgres").exists()
            assert squatter.getsockname()[1] == second.port
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def service_auth() -> dict:
    return {"Authorization": f"Bearer {TOKEN}"}


def test_no_memory_text_reaches_any_log(service):
    assert remember(service, f"Das {SECRET} steht im Tresor").status_code == 201
    with httpx.Client(base_url=service.url(""), timeout=10) as browser:
        login = browser.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
        answer = browser.post(
            "/admin/login/",
            data={"username": "admin", "password": ADMIN_PASSWORD, "csrfmiddlewaretoken": token, "next": "/admin/"},
        )
        assert answer.status_code == 302, answer.text[:500]
        search = browser.get("/admin/memories/memory/", params={"q": SECRET})
        assert search.status_code == 200 and SECRET in search.text
        preview = browser.get(
            reverse("admin:memories_memory_recall_preview"),
            params={"query": SECRET, "room": service.room_id, "speaker": "", "limit": 10},
        )
        assert preview.status_code == 200 and SECRET in preview.text
    time.sleep(0.5)  # let the access log lines be written
    logs = [service.log, *(p for p in service.data_dir.rglob("*") if p.is_file() and "log" in p.name)]
    text = "\n".join(path.read_text(errors="replace") for path in logs)
    assert '"GET /admin/memories/memory/" 200' in text  # the search was logged, without its query
    for form in (SECRET, quote_plus(SECRET), quote(SECRET), "Zebra-Passwort", "98765"):
        assert form not in text, f"{form!r} in a log"


FORGED = "2026-01-01 00:00:00,000 ERROR supervisor: forged by a request"


def test_a_request_cannot_forge_a_log_line(service):
    path = "/internal/v1/x%0A" + quote(FORGED) + "%0D%1B[31m%E2%80%A8%C2%85%00end"
    assert httpx.get(service.url(path), headers=service_auth()).status_code == 404
    assert httpx.get(service.url("/admin/y%0A" + quote(FORGED))).status_code in (302, 404)
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as sock:  # a Host header Django refuses
        sock.sendall(b"GET /admin/ HTTP/1.1\r\nHost: evil\x1b[31m.example\r\nConnection: close\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    time.sleep(0.5)  # let the lines be written
    text = service.log.read_text()
    lines = text.splitlines()
    assert not [line for line in lines if line.startswith(FORGED[:23])]
    assert not [
        line
        for line in lines
        if "forged by a request" in line and "justai_memory.access" not in line and "django.request" not in line
    ]
    access = [line for line in lines if "justai_memory.access" in line and "forged by a request" in line]
    assert len(access) == 2
    assert "/internal/v1/x\\n2026-01-01 " in access[0] and "\\r\\x1b[31m\\u2028\\x85\\x00end" in access[0]
    for raw in ("\x1b", "\u2028", "\x85", "\x00", "\r"):
        assert raw not in text, f"{raw!r} in the log"


def test_a_killed_web_worker_and_a_killed_web_server_recover(service):
    arbiter = service.child("gunicorn")
    worker = arbiter.children()[0]
    worker.kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and worker.pid in [w.pid for w in arbiter.children()]:
        time.sleep(0.1)
    assert remember(service, "Die Mülltonne wird dienstags geleert").status_code == 201
    service.wait_healthy(timeout=30)

    workers = arbiter.children()
    arbiter.kill()
    _, alive = psutil.wait_procs([arbiter, *workers], timeout=10)
    assert not alive  # the dead arbiter's workers are not left holding the port
    with socket.socket() as squatter:  # nor can another program take the port while the web server is down
        with pytest.raises(OSError):
            squatter.bind(("127.0.0.1", service.port))
    deadline = time.monotonic() + 60
    while not any("gunicorn" in " ".join(c.cmdline()) for c in psutil.Process(service.pid).children()):
        assert time.monotonic() < deadline, "the web server was not restarted"
        time.sleep(0.1)
    body = service.wait_healthy(timeout=60)
    assert body["components"]["database"]["ok"]
    assert "web exited with code -9" in service.log.read_text()


def test_a_killed_cluster_is_restarted(service):
    cluster = service.child("qcluster")
    family = [cluster, *cluster.children(recursive=True)]
    cluster.kill()
    _, alive = psutil.wait_procs(family, timeout=10)
    assert not alive  # the dead cluster's workers are not left behind
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # a new cluster process, and health sees it (not the dead one's last heartbeat)
        restarted = [c for c in psutil.Process(service.pid).children() if "qcluster" in " ".join(c.cmdline())]
        response = service.health() if restarted else None
        if response is not None and response.json()["components"]["cluster"]["ok"]:
            break
        time.sleep(0.3)
    else:
        raise AssertionError("the cluster did not come back")
    assert restarted[0].pid != cluster.pid


def test_an_extraction_killed_with_its_cluster_shows_in_health_and_is_retried(service):
    with FakeLLM(port=service.llm_port) as llm:
        llm.reply(extraction_answer(facts=["Die Katze heisst Minka"]), delay=60)  # held when the cluster dies
        llm.reply(extraction_answer(facts=["Die Katze heisst Minka"]))
        conversation = service.api(
            "POST",
            "/internal/v1/conversations",
            {"room_id": service.room_id, "language": "de", "model_location": "local"},
        )
        conversation_id = conversation.json()["id"]
        turns = [{"role": "user", "text": "Unsere Katze heisst Minka und schlaeft am Fenster"}]
        assert (
            service.api("POST", f"/internal/v1/conversations/{conversation_id}/turns", {"turns": turns}).status_code
            == 201
        )
        assert service.api("POST", f"/internal/v1/conversations/{conversation_id}/end").status_code == 200
        deadline = time.monotonic() + 60
        while not [r for r in llm.requests if r.path.endswith("/chat/completions")]:
            assert time.monotonic() < deadline, "the extraction did not call the LLM"
            time.sleep(0.1)
        # The supervisor held: no cluster is restarted, so nothing re-delivers the job while health is read (on a
        # loaded machine the re-delivery, Q_RETRY s after the job was taken, could come before the first health answer).
        os.kill(service.pid, signal.SIGSTOP)
        try:
            cluster = service.child("qcluster")
            os.killpg(os.getpgid(cluster.pid), signal.SIGKILL)  # the whole cluster, the extraction's worker with it
            stalled, deadline = None, time.monotonic() + 60
            while stalled is None and time.monotonic() < deadline:
                response = service.health()
                if response is not None and response.json()["components"]["extraction"].get("stalled"):
                    stalled = response.json()["components"]["extraction"]
                time.sleep(0.2)  # polling: the stall shows once PostgreSQL has ended the dead worker's session
        finally:
            os.kill(service.pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        assert stalled is not None, "the stalled extraction is not in health"
        assert stalled["stalled"] == [conversation_id] and stalled["ok"] is False
        with service.database() as conn:
            status = "running"
            while status == "running" and time.monotonic() < resumed_at + Q_RETRY + 60:
                time.sleep(0.5)
                row = conn.execute(
                    "SELECT extraction_status, extraction_attempts FROM transcripts_conversation WHERE id = %s",
                    [conversation_id],
                ).fetchone()
                status = row[0]
        # Run again once the queue re-delivered it (Q_RETRY after it was taken); each run is an attempt.
        assert row[0] == "done" and row[1] >= 2, (row, service.log.read_text()[-6000:])
        assert len([r for r in llm.requests if r.path.endswith("/chat/completions")]) >= 2
        assert service.health().json()["components"]["extraction"] == {"ok": True, "running": 0, "stalled": []}


def wait_for(condition, attempts: list, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"writes so far: {attempts}"
        time.sleep(0.1)


def test_a_killed_postmaster_is_restarted_and_no_acknowledged_write_is_lost(service):
    acknowledged: list[str] = []
    attempts: list = []
    stop = threading.Event()

    def writer():
        n = 0
        while not stop.is_set():
            n += 1
            text = f"Einkaufsliste Eintrag {n} fuer den Wochenmarkt"
            try:
                status = remember(service, text).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            attempts.append(status)
            if status == 201:
                acknowledged.append(text)

    thread = threading.Thread(target=writer)
    thread.start()
    wait_for(lambda: len(acknowledged) >= 3, attempts)
    # Hold the supervisor so the database stays down while we look at the service.
    os.kill(service.pid, signal.SIGSTOP)
    try:
        os.kill(service.postmaster_pid(), signal.SIGKILL)
        time.sleep(1)
        response = service.health()
        assert response is not None and response.status_code == 503
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["components"]["database"]["ok"] is False
    finally:
        os.kill(service.pid, signal.SIGCONT)
    service.wait_healthy(timeout=60)
    before = len(acknowledged)
    wait_for(lambda: len(acknowledged) >= before + 3, attempts)  # writes are acknowledged again
    stop.set()
    thread.join(30)
    with service.database() as conn:
        stored = {row[0] for row in conn.execute("SELECT content FROM memories_memory")}
    assert set(acknowledged) <= stored
    assert "database restarted" in service.log.read_text()


def test_four_postmaster_crashes_10_s_apart_are_survived(service):
    start = len(service.log.read_text())
    for _ in range(4):
        os.kill(service.postmaster_pid(), signal.SIGKILL)
        time.sleep(10)
        assert service.process.poll() is None, service.log.read_text()[start:]
    service.wait_healthy(timeout=60)
    log = service.log.read_text()[start:]
    # One crash, one failure: "postmaster is gone", or "did not start" when it hit a postmaster in recovery.
    assert log.count("ERROR supervisor: database ") == 4, log
    assert "database restarted (pid None)" not in log and "giving up" not in log
    assert remember(service, "Der Router steht im Flur hinter der Tuer").status_code == 201


def test_sigterm_stops_everything_database_last_within_15_s(service):
    elapsed, code = service.stop(signal.SIGTERM)
    assert elapsed < STOP_LIMIT and code == 0
    log = service.log.read_text()
    tail = log[log.rindex("SIGTERM received") :]
    assert tail.index("web stopped") < tail.index("database stopped")
    assert tail.index("cluster stopped") < tail.index("database stopped")


def test_sigint_stops_a_service_started_in_the_background_and_stale_pids_are_dropped(service):
    registry = service.data_dir / "postgres" / ".handle_pids.json"
    dead = subprocess.Popen(["true"])
    dead.wait()
    registry.write_text(json.dumps([dead.pid]))
    service.start(background_of_a_shell=True)
    assert dead.pid not in json.loads(registry.read_text())
    elapsed, code = service.stop(signal.SIGINT)
    assert elapsed < STOP_LIMIT and code == 0
    assert "SIGINT received" in service.log.read_text()


def test_nothing_outlives_a_killed_supervisor(service):
    service.start()
    tree = service.tree()
    os.kill(service.pid, signal.SIGKILL)
    service.process.wait(5)
    _, alive = psutil.wait_procs(tree, timeout=STOP_LIMIT + 5)
    assert not alive, f"still running: {[(p.pid, p.name()) for p in alive]}"
    assert "the supervisor is gone: fast shutdown of the database" in service.log.read_text()
