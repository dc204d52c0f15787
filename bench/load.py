"""Load benchmark: the service as the run command starts it, driven by concurrent clients over loopback.

    flock /tmp/justai-bench.lock .venv/bin/python bench/load.py                 # 4 and 16 clients, 60 s each
    flock /tmp/justai-bench.lock .venv/bin/python bench/load.py --baseline      # and the same against runserver
    .venv/bin/python bench/load.py --clients 8 --seconds 20                      # the options
    flock /tmp/justai-bench.lock .venv/bin/python bench/load.py --first-calls   # a fresh start's first calls, memory

Starts ``./scripts/run`` exactly as a deployer would (a throwaway JUSTAI_DATA_DIR, a free JUSTAI_PORT
on 127.0.0.1, INTERNAL_API_TOKENS and JUSTAI_ADMIN_PASSWORD set), creates rooms and people with one
``manage.py shell`` call, stores a few hundred memories through the API, then runs N closed-loop
clients (one process each, keep-alive HTTP/1.1, or a new connection per request with
``--fresh-connections``) for T seconds: recall 80 % / remember 20 %, household
texts in de/it/en/es, several speakers and rooms. Prints throughput, p50/p95/p99 per endpoint, errors by
kind, PostgreSQL's connection count for the database (pg_stat_activity) before, at peak (sampled
every 0.25 s) and after, and the sessions opened during the run (pg_stat_database.sessions; the job
cluster's own, measured over 5 idle seconds before, beside them). Then, on the same database and
the same machine, the in-process baseline: one process calling ``memory_recall`` (what the recall
view calls) in a loop for the same questions, without HTTP; served recall throughput is printed as
a share of it. ``--baseline`` repeats the run against the old dev server (``manage.py runserver
--noreload --insecure`` with the cluster beside it, as the run command served before), started here.
Clients share the machine's cores with the server: the figures include their cost.

``--first-calls``: a fresh start (the default embedder), then 10 rounds of remember, recall and forget
(find_to_forget and its confirmation, of the memory just stored), one at a time, each on a new
connection, so that either worker may get any; prints each call's time, the first against the tenth
and the median, and the memory (USS and PSS) of each process of the tree after the start and after the
calls (``--heavy-seconds S``: and after S seconds of 8 clients).
"""

import argparse
import http.client
import json
import multiprocessing
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import ROOT, percentile

PY = str(ROOT / ".venv" / "bin" / "python")
TOKEN = "bench-load-token-0123456789abcdef"
DATABASE_NAME = "justai_memory"
START_TIMEOUT = 300.0
STOP_TIMEOUT = 20.0
REQUEST_TIMEOUT = 30.0

# The run command as main served before the production server: migrations, the one-off commands, the
# cluster in the background and Django's dev server in the foreground.
OLD_RUN = """
set -euo pipefail
PY=.venv/bin/python
$PY manage.py migrate --noinput
$PY manage.py createcachetable  # today's settings keep the cluster's heartbeat in a table; health reads it
$PY manage.py embedder_status
$PY manage.py ensure_schedules
$PY manage.py ensure_admin --url "http://$JUSTAI_HOST:$JUSTAI_PORT/admin/"
$PY manage.py qcluster &
cluster=$!
trap 'kill "$cluster" 2>/dev/null || true; wait "$cluster" 2>/dev/null || true' EXIT INT TERM
$PY manage.py runserver --noreload --insecure "$JUSTAI_HOST:$JUSTAI_PORT"
"""

HOUSEHOLD_SETUP = """
import json
from people.models import Person, Room
rooms = [Room.objects.get_or_create(name=n)[0].id for n in ("Küche", "Wohnzimmer", "Soggiorno", "Office")]
people = [
    Person.objects.get_or_create(name=n, defaults={"preferred_language": lang})[0].id
    for n, lang in (("Anna", "de"), ("Marco", "it"), ("Emily", "en"), ("Lucía", "es"), ("Jonas", "de"))
]
print("HOUSEHOLD " + json.dumps({"rooms": rooms, "people": people}))
from django.conf import settings
names = ("WEB_WORKERS", "DATABASE_POOL_MAX_SIZE", "Q_CLUSTER")
print("SETTINGS " + json.dumps({name: getattr(settings, name, None) for name in names}, default=str))
"""

# The in-process baseline: the recall view's work without HTTP, one process, one thread, the same questions.
IN_PROCESS = """
import json, random, time
from bench.load import recall_body
from justai_memory.api.caller import caller_of_ids
from memories.services.recall import memory_recall
household, seconds = json.loads(HOUSEHOLD), SECONDS
rng, latencies = random.Random(1000), []
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    body = recall_body(rng, household)
    began = time.perf_counter()
    caller = caller_of_ids(
        room_id=body["room_id"], speaker_id=body.get("speaker_id"), model_location=body["model_location"]
    )
    memory_recall(query=body["query"], caller=caller, limit=body["limit"])
    latencies.append((time.perf_counter() - began) * 1000)
print("INPROCESS " + json.dumps({"latencies": latencies, "seconds": seconds}))
"""

# Household facts and questions; {n}, {t}, {p} vary so that most remembered texts are distinct.
FACTS = {
    "de": [
        "Der Ersatzschlüssel für den Keller liegt in der blauen Dose im Flur, Fach {n}",
        "Der Code für das Gartentor ist {n}",
        "Oma Hilde hat am {d}. März Geburtstag und mag {p}",
        "Die Mülltonne wird jeden Dienstag um {t} Uhr abgeholt",
        "Der Kinderarzt Dr. Weber hat die Nummer 0711 {n}",
        "Jonas trinkt seinen Kaffee ohne Zucker, aber mit {p}",
    ],
    "it": [
        "La chiave di riserva della cantina è nella scatola blu nel corridoio, ripiano {n}",
        "Il codice del cancello del giardino è {n}",
        "Marco non mangia {p} e preferisce la pasta al pomodoro",
        "La riunione di condominio è il {d} aprile alle {t}",
        "Il numero del idraulico è 333 {n}",
    ],
    "en": [
        "The spare key for the shed is under the third flower pot, number {n}",
        "Emily's dentist appointment is on the {d}th at {t} o'clock",
        "The wifi password for guests is garden-{n}",
        "Emily is allergic to {p}",
        "The dog gets fed at {t} and gets half a cup of {p}",
    ],
    "es": [
        "La llave del trastero está en el cajón de la cocina número {n}",
        "Lucía prefiere el té verde con {p} por la mañana",
        "El cumpleaños de la abuela es el {d} de mayo",
        "La clase de natación de los niños es los jueves a las {t}",
        "El código de la alarma es {n}",
    ],
}
QUESTIONS = {
    "de": [
        "Wo ist der Ersatzschlüssel für den Keller?",
        "Wie lautet der Code für das Gartentor?",
        "Wann hat Oma Geburtstag?",
        "Wann wird der Müll abgeholt?",
        "Wie ist die Nummer vom Kinderarzt?",
        "Wie trinkt Jonas seinen Kaffee?",
    ],
    "it": [
        "Dove si trova la chiave di riserva della cantina?",
        "Qual è il codice del cancello?",
        "Cosa non mangia Marco?",
        "Quando è la riunione di condominio?",
        "Hai il numero dell'idraulico?",
    ],
    "en": [
        "Where is the spare key for the shed?",
        "When is Emily's dentist appointment?",
        "What is the guest wifi password?",
        "What is Emily allergic to?",
        "When does the dog get fed?",
    ],
    "es": [
        "¿Dónde está la llave del trastero?",
        "¿Cómo toma Lucía el té?",
        "¿Cuándo es el cumpleaños de la abuela?",
        "¿A qué hora es la clase de natación?",
        "¿Cuál es el código de la alarma?",
    ],
}
FILLERS = ["Honig", "Milch", "funghi", "peanuts", "cacahuetes", "limón", "Zimt", "chicken", "Hafermilch", "avena"]


def household_text(rng: random.Random, *, language: str) -> str:
    template = rng.choice(FACTS[language])
    return template.format(
        n=rng.randint(100, 99999),
        d=rng.randint(1, 28),
        t=f"{rng.randint(6, 20)}:{rng.choice(('00', '30'))}",
        p=rng.choice(FILLERS),
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the service --------------------------------------------------------------------------------


class Service:
    """The service in its own process group on 127.0.0.1, its data in a throwaway folder."""

    def __init__(self, *, baseline: bool):
        self.baseline = baseline
        self.scratch = Path(tempfile.mkdtemp(prefix="justai-load-"))
        self.port = free_port()
        self.env = {
            **os.environ,
            "JUSTAI_DATA_DIR": str(self.scratch / "data"),
            "JUSTAI_HOST": "127.0.0.1",
            "JUSTAI_PORT": str(self.port),
            "INTERNAL_API_TOKENS": TOKEN,
            "JUSTAI_ADMIN_PASSWORD": "bench-admin-password-4711",
            "LOG_LEVEL": "WARNING",
        }
        self.env.pop("EMBEDDED_DB_DIR", None)
        self.log_path = self.scratch / "service.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = ["bash", "-c", OLD_RUN] if self.baseline else ["./scripts/run"]
        self.log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the service exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                status, _ = request(self.port, "GET", "/internal/v1/health", None, timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit(
            f"the service did not answer /internal/v1/health within {START_TIMEOUT:.0f} s:\n{self.log_tail()}"
        )

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )
        if done.returncode:
            raise SystemExit(f"manage.py {args[0]} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> float | None:
        """SIGTERM to the run command only, as systemd and docker send it; the seconds until it exited, None when
        it had to be killed. Whatever it left in its process group is killed afterwards."""
        took = None
        if self.process and self.process.poll() is None:
            began = time.monotonic()
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT)
                took = time.monotonic() - began
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        # Whatever the service left running in its group (the old run command leaves runserver and the database).
        try:
            os.killpg(self.process.pid, 0)
            print("  (processes of the service were left in its group after it exited: killed)")
            os.killpg(self.process.pid, signal.SIGKILL)
            time.sleep(1)
        except (ProcessLookupError, PermissionError, TypeError):
            pass
        self._stop_leftover_postgres()
        return took

    def _stop_leftover_postgres(self) -> None:
        pid_file = self.scratch / "data" / "postgres" / "postmaster.pid"
        if not pid_file.exists():
            return
        postmaster = int(pid_file.read_text().split()[0])
        try:
            os.kill(postmaster, signal.SIGINT)  # PostgreSQL's fast shutdown
        except ProcessLookupError:
            return
        print("  (the embedded PostgreSQL was still running after the service stopped: fast shutdown)")
        for _ in range(100):
            try:
                os.kill(postmaster, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    def cleanup(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)

    def connection_params(self) -> dict | None:
        """How to reach the service's database: DATABASE_URL, or the embedded server's socket."""
        if url := os.environ.get("DATABASE_URL"):
            return {"conninfo": url}
        pid_file = self.scratch / "data" / "postgres" / "postmaster.pid"
        if not pid_file.exists():
            return None
        lines = pid_file.read_text().splitlines()
        return {"host": lines[4] or "127.0.0.1", "port": int(lines[3]), "user": "postgres", "dbname": "postgres"}


class ConnectionSampler:
    """Counts the client connections to the service's database (pg_stat_activity; not autovacuum or parallel workers)."""

    def __init__(self, params: dict | None):
        self.conn = None
        if params is not None:
            import psycopg

            self.conn = psycopg.connect(**params, autocommit=True)
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sessions(self) -> int | None:
        """The sessions ever opened to the service's database (pg_stat_database), this sampler's included."""
        if self.conn is None:
            return None
        return self.conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()[0]

    def count(self) -> int | None:
        if self.conn is None:
            return None
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend' "
            "AND pid <> pg_backend_pid()",
            [DATABASE_NAME],
        ).fetchone()
        return row[0]

    def start_peak(self) -> None:
        self.peak = self.count() or 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.25):
            self.peak = max(self.peak, self.count() or 0)

    def stop_peak(self) -> int | None:
        self._stop.set()
        if self._thread:
            self._thread.join()
        return self.peak if self.conn is not None else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# --- the clients --------------------------------------------------------------------------------


def request(port: int, method: str, path: str, body: dict | None, *, timeout: float = REQUEST_TIMEOUT):
    """One request on a fresh connection (setup and health checks)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        return send(conn, method, path, body)
    finally:
        conn.close()


def send(conn: http.client.HTTPConnection, method: str, path: str, body: dict | None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    kind = response.getheader("Content-Type", "").split(";")[0]
    return response.status, payload if kind == "application/json" else kind.encode() or b"?"


def remember_body(rng: random.Random, household: dict) -> dict:
    language = rng.choice(list(FACTS))
    speaker = rng.choice(household["people"] + [None])  # some turns come from an unknown speaker
    scope = rng.choices(["shared", "room", "private"], weights=[6, 2, 2])[0] if speaker else "shared"
    body = {"content": household_text(rng, language=language), "room_id": rng.choice(household["rooms"])}
    body.update({"language": language, "scope": scope, "model_location": "local"})
    if speaker:
        body["speaker_id"] = speaker
    return body


def recall_body(rng: random.Random, household: dict) -> dict:
    language = rng.choice(list(QUESTIONS))
    body = {
        "query": rng.choice(QUESTIONS[language]),
        "room_id": rng.choice(household["rooms"]),
        "limit": 10,
        "model_location": "local",
    }
    if speaker := rng.choice(household["people"] + [None]):
        body["speaker_id"] = speaker
    return body


def client_loop(port: int, household: dict, seed: int, start_at: float, end_at: float, fresh: bool, results) -> None:
    """One closed-loop client: the next request is sent when the last answer is in (``fresh``: a new connection each)."""
    rng = random.Random(seed)
    records: list[tuple[str, float, str | None]] = []
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    reconnects = 0
    time.sleep(max(0.0, start_at - time.time()))
    while time.time() < end_at:
        if rng.random() < 0.8:
            endpoint, path, body = "recall", "/internal/v1/recall", recall_body(rng, household)
        else:
            endpoint, path, body = "remember", "/internal/v1/memories/remember", remember_body(rng, household)
        began = time.perf_counter()
        error = None
        for attempt in (1, 2):
            try:
                status, payload = send(conn, "POST", path, body)
                if status >= 400:
                    kind = "json" if payload.startswith(b"{") else payload.decode(errors="replace")
                    error = f"HTTP {status} ({kind})"
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # A keep-alive connection the server closed between two requests: open a new one once,
                # as HTTP clients do; a second failure is an error.
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
                reconnects += 1
                if attempt == 2:
                    error = type(exc).__name__
            except OSError as exc:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
                error = type(exc).__name__
                break
        records.append((endpoint, (time.perf_counter() - began) * 1000, error))
        if fresh:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    conn.close()
    results.put((records, reconnects))


def seed_memories(port: int, household: dict, *, count: int) -> None:
    """A household's worth of memories before the clock starts (4 threads, sequential each)."""
    rng = random.Random(7)
    bodies = [remember_body(rng, household) for _ in range(count)]
    failures = Counter()

    def work(chunk):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
        for body in chunk:
            status, _ = send(conn, "POST", "/internal/v1/memories/remember", body)
            if status not in (200, 201):
                failures[status] += 1
        conn.close()

    threads = [threading.Thread(target=work, args=(bodies[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"seeding memories failed: {dict(failures)}")


def drive(port: int, household: dict, *, clients: int, seconds: float, fresh: bool, sampler: ConnectionSampler) -> dict:
    idle_sessions = sampler.sessions()
    time.sleep(5.0)  # the sessions the job cluster opens by itself (its status saves) over 5 idle seconds
    idle_sessions = None if idle_sessions is None else (sampler.sessions() - idle_sessions) / 5.0
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    start_at = time.time() + 2.0  # the client processes are up and connected by then
    end_at = start_at + seconds
    before = sampler.count()
    load_before = os.getloadavg()[0]
    processes = [
        context.Process(target=client_loop, args=(port, household, 1000 + i, start_at, end_at, fresh, results))
        for i in range(clients)
    ]
    for process in processes:
        process.start()
    time.sleep(max(0.0, start_at - time.time()))
    sessions_before = sampler.sessions()
    sampler.start_peak()
    gathered = [results.get(timeout=seconds + REQUEST_TIMEOUT + 60) for _ in processes]
    elapsed = time.time() - start_at
    peak = sampler.stop_peak()
    sessions = None if sessions_before is None else sampler.sessions() - sessions_before
    for process in processes:
        process.join()
    time.sleep(5.0)
    after = sampler.count()
    records = [record for client_records, _ in gathered for record in client_records]
    return {
        "clients": clients,
        "elapsed": elapsed,
        "records": records,
        "reconnects": sum(r for _, r in gathered),
        "connections": (before, peak, after),
        "sessions": (sessions, None if idle_sessions is None else idle_sessions * elapsed),
        "load": (load_before, os.getloadavg()[0]),
    }


def report(run: dict, *, label: str) -> dict:
    records = run["records"]
    errors = Counter(error for _, _, error in records if error)
    ok = [r for r in records if not r[2]]
    before, peak, after = run["connections"]
    summary = {
        "label": label,
        "clients": run["clients"],
        "requests": len(records),
        "errors": sum(errors.values()),
        "throughput": len(records) / run["elapsed"],
        "ok_throughput": len(ok) / run["elapsed"],
        "endpoints": {},
    }
    print(f"\n== {label}: {run['clients']} clients, {run['elapsed']:.1f} s")
    print(f"  machine load average (1 min) before {run['load'][0]:.1f}, at the end {run['load'][1]:.1f}")
    print(
        f"  requests {len(records)}, {summary['throughput']:.1f} req/s ({summary['ok_throughput']:.1f} req/s answered "
        f"without error), errors {summary['errors']}, reconnects {run['reconnects']}"
    )
    by_endpoint = defaultdict(list)
    for endpoint, latency, error in records:
        if not error:
            by_endpoint[endpoint].append(latency)
    for endpoint in ("recall", "remember"):
        latencies = by_endpoint.get(endpoint, [])
        if not latencies:
            print(f"  {endpoint:9s} no successful requests")
            continue
        p50, p95, p99 = (percentile(latencies, q) for q in (50, 95, 99))
        summary["endpoints"][endpoint] = {"count": len(latencies), "p50": p50, "p95": p95, "p99": p99}
        print(f"  {endpoint:9s} n={len(latencies):6d}  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  p99 {p99:7.1f} ms")
    for kind, count in errors.most_common():
        print(f"  error {kind}: {count}")
    print(f"  PostgreSQL connections to {DATABASE_NAME}: before {before}, peak {peak}, 5 s after {after}")
    sessions, idle = run["sessions"]
    if sessions is not None:
        print(f"  sessions opened during the run: {sessions} (the job cluster's idle rate over the run: {idle:.0f})")
    summary["connections"] = run["connections"]
    summary["sessions"] = run["sessions"]
    recalls = summary["endpoints"].get("recall", {}).get("count", 0)
    summary["recall_throughput"] = recalls / run["elapsed"]
    return summary


def printed(output: str, prefix: str) -> dict:
    for line in output.splitlines():
        if line.startswith(prefix + " "):
            return json.loads(line.removeprefix(prefix + " "))
    raise SystemExit(f"no {prefix} line in the shell's output:\n{output}")


def bench(*, baseline: bool, clients: list[int], seconds: float, memories: int, fresh: bool) -> list[dict]:
    label = "baseline: runserver (old run command)" if baseline else "./scripts/run"
    service = Service(baseline=baseline)
    summaries = []
    print(f"\n### {label}: starting on 127.0.0.1:{service.port}, data in {service.scratch}")
    try:
        began = time.monotonic()
        service.start()
        print(f"  healthy after {time.monotonic() - began:.1f} s")
        output = service.manage("shell", "-c", HOUSEHOLD_SETUP)
        household, configured = printed(output, "HOUSEHOLD"), printed(output, "SETTINGS")
        print(
            f"  configured: web workers {configured['WEB_WORKERS']}, database pool per web worker "
            f"{configured['DATABASE_POOL_MAX_SIZE']}, cluster workers {(configured['Q_CLUSTER'] or {}).get('workers')}"
        )
        began = time.monotonic()
        seed_memories(service.port, household, count=memories)
        print(f"  {memories} memories stored in {time.monotonic() - began:.1f} s")
        sampler = ConnectionSampler(service.connection_params())
        try:
            for n in clients:
                summaries.append(
                    report(
                        drive(service.port, household, clients=n, seconds=seconds, fresh=fresh, sampler=sampler),
                        label=label,
                    )
                )
        finally:
            sampler.close()
        if not baseline:
            inprocess = in_process_recall(service, household, seconds=min(seconds, 30.0))
            for summary in summaries:
                summary["in_process"] = inprocess
                summary["share"] = summary["recall_throughput"] / inprocess
                print(
                    f"  {summary['clients']} clients: served recall {summary['recall_throughput']:.1f}/s = "
                    f"{summary['share']:.0%} of the in-process {inprocess:.1f}/s"
                )
    finally:
        took = service.stop()
        print(f"  stopped by SIGTERM in {took:.1f} s" if took is not None else "  had to be killed (SIGKILL)")
        service.cleanup()
    return summaries


def in_process_recall(service: Service, household: dict, *, seconds: float) -> float:
    """Recalls per second of one process calling memory_recall in a loop on the service's database (the service idle)."""
    script = IN_PROCESS.replace("HOUSEHOLD", repr(json.dumps(household))).replace("SECONDS", repr(seconds))
    result = printed(service.manage("shell", "-c", script), "INPROCESS")
    latencies = result["latencies"][1:]  # the first pays for loading the embedder
    p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
    rate = len(latencies) / (sum(latencies) / 1000)
    print(
        f"\n== in process: memory_recall in a loop, {len(latencies)} recalls, {rate:.1f}/s, p50 {p50:.1f} ms, p95 {p95:.1f} ms"
    )
    return rate


def tree_memory(service: Service) -> dict[str, tuple[float, float]]:
    """MB of unique (USS) and proportional (PSS) memory per kind of process of the service's tree: web workers,
    the rest, PostgreSQL. USS leaves out what processes share (a model loaded before the workers fork); PSS
    gives each process its share of it, so the PSS of a tree is what it takes of the machine's memory."""
    import psutil

    supervisor = psutil.Process(service.process.pid)
    kinds: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    processes = supervisor.children(recursive=True)
    pid_file = service.scratch / "data" / "postgres" / "postmaster.pid"
    if pid_file.exists():
        postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
        processes += [postmaster, *postmaster.children(recursive=True)]
    for process in [supervisor, *processes]:
        try:
            cmdline = " ".join(process.cmdline())
            info = process.memory_full_info()
        except psutil.Error:
            continue
        if "postgres" in process.name() or "postgres" in cmdline.split(" ", 1)[0]:
            kind = "postgresql"
        elif "gunicorn" in cmdline and process.parent() and "gunicorn" in " ".join(process.parent().cmdline()):
            kind = f"web worker {process.pid}"
        elif "gunicorn" in cmdline:
            kind = "web arbiter"
        elif "qcluster" in cmdline:
            kind = "job cluster (all its processes)"
        else:
            kind = "supervisor and guard"
        kinds[kind][0] += info.uss / 2**20
        kinds[kind][1] += info.pss / 2**20
    return {kind: (uss, pss) for kind, (uss, pss) in kinds.items()}


def first_calls(*, rounds: int, heavy_seconds: float) -> None:
    service = Service(baseline=False)
    print(f"\n### first calls after a start: ./scripts/run on 127.0.0.1:{service.port}, data in {service.scratch}")
    try:
        began = time.monotonic()
        service.start()
        print(f"  healthy after {time.monotonic() - began:.1f} s")
        household = printed(service.manage("shell", "-c", HOUSEHOLD_SETUP), "HOUSEHOLD")
        idle = tree_memory(service)
        rng = random.Random(36)
        times: dict[str, list[float]] = {
            "remember": [],
            "recall": [],
            "forget": [],
            "find_to_forget": [],
            "confirm": [],
        }
        for _ in range(rounds):
            body = remember_body(rng, household)
            body["scope"] = "shared"
            body.pop("speaker_id", None)
            began = time.monotonic()
            status, payload = request(service.port, "POST", "/internal/v1/memories/remember", body)
            times["remember"].append((time.monotonic() - began) * 1000)
            assert status in (200, 201), payload[:300]
            began = time.monotonic()
            status, payload = request(service.port, "POST", "/internal/v1/recall", recall_body(rng, household))
            times["recall"].append((time.monotonic() - began) * 1000)
            assert status in (200, 201), payload[:300]
            find = {"query": body["content"], "room_id": body["room_id"], "model_location": "local"}
            began = time.monotonic()
            status, payload = request(service.port, "POST", "/internal/v1/memories/find_to_forget", find)
            assert status in (200, 201), payload[:300]
            times["find_to_forget"].append((time.monotonic() - began) * 1000)
            found = json.loads(payload)
            ids = [candidate["id"] for candidate in found["candidates"]][:1]
            status, payload = request(
                service.port,
                "POST",
                "/internal/v1/memories/forget",
                {"token": found["token"], "confirm": True, "memory_ids": ids},
            )
            times["forget"].append((time.monotonic() - began) * 1000)
            times["confirm"].append(times["forget"][-1] - times["find_to_forget"][-1])
            assert status in (200, 201), payload[:300]
        after = tree_memory(service)
        heavy = None
        if heavy_seconds:  # heavy use: 8 closed-loop clients (recall 80 %, remember 20 %) on the same service
            sampler = ConnectionSampler(service.connection_params())
            drive(service.port, household, clients=8, seconds=heavy_seconds, fresh=False, sampler=sampler)
            sampler.close()
            heavy = tree_memory(service)
    finally:
        took = service.stop()
        print(f"  stopped by SIGTERM in {took:.1f} s" if took is not None else "  had to be killed (SIGKILL)")
        service.cleanup()
    print("\n| call | 1st ms | 2nd ms | 10th ms | median ms | max ms | 1st / 10th | 1st / median of the others |")
    print("|---|---|---|---|---|---|---|---|")
    for name, values in times.items():
        print(
            f"| {name} | {values[0]:.0f} | {values[1]:.0f} | {values[-1]:.0f} | {percentile(values, 50):.0f} | "
            f"{max(values):.0f} | {values[0] / values[-1]:.1f} | {values[0] / percentile(values[1:], 50):.1f} |"
        )
    columns = {"after the start": idle, "after the calls": after, f"after {heavy_seconds:.0f} s of 8 clients": heavy}
    columns = {name: figures for name, figures in columns.items() if figures is not None}
    print("\n| process | " + " | ".join(f"USS / PSS MB {name}" for name in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for kind in sorted(set().union(*columns.values())):
        cells = [figures.get(kind, (0, 0)) for figures in columns.values()]
        print(f"| {kind} | " + " | ".join(f"{uss:.0f} / {pss:.0f}" for uss, pss in cells) + " |")
    totals = [(sum(u for u, _ in f.values()), sum(p for _, p in f.values())) for f in columns.values()]
    print("| whole tree | " + " | ".join(f"{uss:.0f} / {pss:.0f}" for uss, pss in totals) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[4, 16], help="client counts to run (default 4 16)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds per client count (default 60)")
    parser.add_argument("--memories", type=int, default=300, help="memories stored before the clock starts")
    parser.add_argument("--baseline", action="store_true", help="also run against the old dev server (runserver)")
    parser.add_argument(
        "--fresh-connections", action="store_true", help="a new TCP connection per request instead of keep-alive"
    )
    parser.add_argument(
        "--first-calls", action="store_true", help="a fresh start's first remember/recall/forget and memory, then stop"
    )
    parser.add_argument(
        "--heavy-seconds", type=float, default=0.0, help="with --first-calls: then 8 clients this long, memory again"
    )
    args = parser.parse_args()
    if args.first_calls:
        first_calls(rounds=10, heavy_seconds=args.heavy_seconds)
        return
    if not 1 <= max(args.clients) <= 64 or not 1 <= args.seconds <= 600:
        parser.error("clients 1..64, seconds 1..600")
    connections = "a new connection per request" if args.fresh_connections else "keep-alive connections"
    print(f"{os.cpu_count()} cores; clients are processes on the same machine as the server, {connections}")
    options = {
        "clients": args.clients,
        "seconds": args.seconds,
        "memories": args.memories,
        "fresh": args.fresh_connections,
    }
    summaries = bench(baseline=False, **options)
    if args.baseline:
        summaries += bench(baseline=True, **options)
    print(
        "\n| server | clients | req/s | errors | recall p50 / p95 / p99 ms | remember p50 / p95 / p99 ms "
        "| connections before / peak / after | sessions opened (cluster's idle rate) | recall/s, share of in-process |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in summaries:
        cells = []
        for endpoint in ("recall", "remember"):
            e = s["endpoints"].get(endpoint)
            cells.append(f"{e['p50']:.0f} / {e['p95']:.0f} / {e['p99']:.0f}" if e else "-")
        before, peak, after = s["connections"]
        sessions, idle = s["sessions"]
        opened = "-" if sessions is None else f"{sessions} ({idle:.0f})"
        share = f"{s['recall_throughput']:.1f}, {s['share']:.0%}" if "share" in s else f"{s['recall_throughput']:.1f}"
        print(
            f"| {s['label']} | {s['clients']} | {s['throughput']:.1f} | {s['errors']} of {s['requests']} | "
            f"{cells[0]} | {cells[1]} | {before} / {peak} / {after} | {opened} | {share} |"
        )


if __name__ == "__main__":
    sys.exit(main())
