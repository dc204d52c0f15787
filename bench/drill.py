"""The hostile-client drill: slow readers, a held table lock, a port squatter and limit-length texts, while probes run.

    flock /tmp/justai-bench.lock .venv/bin/python bench/drill.py [--seconds 20] [--export-memories 6000]

Starts ``./scripts/run`` as a deployer would (bench/load.py's Service: default settings, the default
embedder, a throwaway data folder, a free port on 127.0.0.1), stores a household, and runs two
background clients for the whole drill: a prober (GET /internal/v1/health and POST recall, one after
the other, each on a new connection, every 0.25 s) and a writer (one remember every 0.5 s; each
acknowledged id is looked up at the end: "nothing lost"). The phases, each ``--seconds`` long:

1. quiet: the probes alone (the same run's baseline).
2. slow readers: 16 clients with a 1 KB receive buffer that ask for a 3.3 MB static file and never read,
   each opened again as soon as the server drops it; 8 that ask for a person's export
   (``--export-memories`` memories, ~1.5 KB each) and 4 MCP calls (tools/list), never read, held.
3. a held lock: ``LOCK TABLE memories_memory`` held by another connection for the whole phase (recall
   cannot answer 200 then: it must answer the JSON 503 "busy" within WEB_STATEMENT_TIMEOUT and free
   its place; /health must answer 200 within 1 s).
4. a port squatter: a second installation (another data folder) started on the same port must exit 1
   with one line, before it starts anything, while the first serves on.
5. limit-length texts: remember 4,000 characters of ordinary de/it/en/es (bench/text_limits.py) per
   language, every 1 s.

Prints, per phase and probe, the count, p50/p95/max in ms, and every answer that was not a 200 (by status),
the slow readers' drops, the squatter's exit and line, the limit-length answers and the writer's tally.
"""

import argparse
import json
import random
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import ROOT, percentile
from bench.load import DATABASE_NAME, HOUSEHOLD_SETUP, TOKEN, Service, printed, recall_body, remember_body, request

BIG_STATIC = "/static/ninja/redoc.standalone.js.map"
PROBE_EVERY, WRITE_EVERY = 0.25, 0.5


class Probes(threading.Thread):
    """Health and recall, one after the other, until stopped; each answer is recorded under the current phase."""

    def __init__(self, port: int, household: dict):
        super().__init__(daemon=True)
        self.port, self.household, self.phase = port, household, "start"
        self.records: dict[str, list[tuple[str, int, float]]] = defaultdict(list)
        self.stopped = threading.Event()

    def run(self) -> None:
        rng = random.Random(48)
        while not self.stopped.is_set():
            for name, method, path, body in (
                ("health", "GET", "/internal/v1/health", None),
                ("recall", "POST", "/internal/v1/recall", recall_body(rng, self.household)),
            ):
                phase, began = self.phase, time.monotonic()
                try:
                    status, _ = request(self.port, method, path, body, timeout=30)
                except OSError as exc:
                    status = type(exc).__name__
                self.records[phase].append((name, status, (time.monotonic() - began) * 1000))
            self.stopped.wait(PROBE_EVERY)


class Writer(threading.Thread):
    """One remember every WRITE_EVERY s; the ids of the acknowledged ones."""

    def __init__(self, port: int, household: dict):
        super().__init__(daemon=True)
        self.port, self.household = port, household
        self.acknowledged: list[int] = []
        self.refused: Counter = Counter()
        self.stopped = threading.Event()

    def run(self) -> None:
        rng = random.Random(4711)
        while not self.stopped.is_set():
            body = remember_body(rng, self.household)
            body["content"] += f" (drill {len(self.acknowledged) + sum(self.refused.values())})"
            try:
                status, payload = request(self.port, "POST", "/internal/v1/memories/remember", body, timeout=30)
            except OSError as exc:
                status, payload = type(exc).__name__, b""
            if status in (200, 201):
                self.acknowledged.append(json.loads(payload)["id"])
            else:
                self.refused[status] += 1
            self.stopped.wait(WRITE_EVERY)


def unread(port: int, head: bytes) -> socket.socket:
    """A connection with a 1 KB receive buffer that sends ``head`` and never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.connect(("127.0.0.1", port))
    sock.sendall(head)
    return sock


def dropped(sock: socket.socket) -> bool:
    """Whether the server has reset or closed this connection (its pending error, or its end of file)."""
    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
        return True
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
    return info[0] != 1  # TCP_ESTABLISHED


class SlowReaders(threading.Thread):
    """Never-reading clients of each kind; a kind marked to reopen is replaced as soon as the server drops it."""

    def __init__(self, port: int, heads: dict[str, tuple[int, bytes, bool]]):
        super().__init__(daemon=True)
        self.port, self.heads = port, heads
        self.opened, self.drops = Counter(), Counter()
        self.stopped = threading.Event()

    def run(self) -> None:
        open_ = {kind: [self._open(kind) for _ in range(count)] for kind, (count, _, _) in self.heads.items()}
        while not self.stopped.wait(0.1):
            for kind, socks in open_.items():
                for i, sock in enumerate(socks):
                    if sock.fileno() != -1 and dropped(sock):
                        sock.close()
                        self.drops[kind] += 1
                        if self.heads[kind][2]:
                            socks[i] = self._open(kind)
        for socks in open_.values():
            for sock in socks:
                sock.close()

    def _open(self, kind: str) -> socket.socket:
        self.opened[kind] += 1
        return unread(self.port, self.heads[kind][1])


def big_export(service: Service, household: dict, *, memories: int) -> str:
    """A person's export path, the person given ``memories`` copies (~1.5 KB each) of one remembered memory."""
    import psycopg

    person = household["people"][0]
    text = "Der Ersatzschlüssel für den Keller liegt in der blauen Dose im Flur (Export)"
    body = {"content": text, "room_id": household["rooms"][0], "speaker_id": person, "scope": "private"}
    status, payload = request(service.port, "POST", "/internal/v1/memories/remember", body)
    assert status in (200, 201), payload
    with psycopg.connect(**{**service.connection_params(), "dbname": DATABASE_NAME}, autocommit=True) as conn:
        columns = [
            name
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories_memory' "
                "AND is_generated = 'NEVER' AND column_name NOT IN ('id', 'content') ORDER BY ordinal_position"
            )
        ]
        listed = ", ".join(columns)
        conn.execute(
            f"INSERT INTO memories_memory (content, {listed}) SELECT content || ' ' || g || repeat(' Eintrag', 180), "
            f"{listed} FROM memories_memory, generate_series(1, %s) AS g WHERE content = %s",
            [memories, text],
        )
    began = time.monotonic()
    status, payload = request(service.port, "GET", f"/internal/v1/people/{person}/export", None, timeout=120)
    print(
        f"  export of person {person}: HTTP {status}, {len(payload) / 2**20:.1f} MB in {time.monotonic() - began:.1f} s"
    )
    return f"/internal/v1/people/{person}/export"


def heads(port: int, export: str) -> dict[str, tuple[int, bytes, bool]]:
    """Each kind of slow reader: how many, what it sends, whether it comes back as soon as it is dropped."""
    host = f"Host: 127.0.0.1:{port}\r\n"
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    mcp_body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    mcp = (
        f"POST /mcp HTTP/1.1\r\n{host}{auth}Content-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(mcp_body)}\r\n\r\n{mcp_body}"
    )
    return {
        "static file": (16, f"GET {BIG_STATIC} HTTP/1.1\r\n{host}\r\n".encode(), True),
        "export": (8, f"GET {export} HTTP/1.1\r\n{host}{auth}\r\n".encode(), False),
        "MCP": (4, mcp.encode(), False),
    }


def held_lock(service: Service, seconds: float) -> None:
    import psycopg

    with psycopg.connect(**{**service.connection_params(), "dbname": DATABASE_NAME}) as conn:
        conn.execute("LOCK TABLE memories_memory IN ACCESS EXCLUSIVE MODE")
        time.sleep(seconds)
        conn.rollback()


def squatter(service: Service) -> tuple[int, float, str]:
    """A second installation on the first's port: (exit code, seconds, its last line)."""
    second = Service(baseline=False)
    env = {**second.env, "JUSTAI_PORT": str(service.port)}
    began = time.monotonic()
    try:
        done = subprocess.run(["./scripts/run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:
        second.cleanup()
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, time.monotonic() - began, lines[-1] if lines else ""


def limit_texts(service: Service, household: dict, seconds: float) -> Counter:
    from bench.text_limits import sources, windows
    from memories.limits import MAX_TEXT_CHARS

    texts = [
        (code, window)
        for (code, _source), sentences in sources().items()
        for window in windows(sentences, chars=MAX_TEXT_CHARS, count=3)
    ]
    answers, end, i = Counter(), time.monotonic() + seconds, 0
    while time.monotonic() < end:
        code, text = texts[i % len(texts)]
        body = {"content": text, "room_id": household["rooms"][0], "language": code, "model_location": "local"}
        status, _ = request(service.port, "POST", "/internal/v1/memories/remember", body, timeout=60)
        answers[(code, status)] += 1
        i += 1
        time.sleep(1)
    return answers


def report(probes: Probes) -> None:
    print("\n| phase | probe | n | p50 ms | p95 ms | max ms | not 200 |")
    print("|---|---|---|---|---|---|---|")
    for phase, records in probes.records.items():
        for name in ("health", "recall"):
            times = [ms for n, _status, ms in records if n == name]
            others = Counter(status for n, status, _ms in records if n == name and status != 200)
            if times:
                print(
                    f"| {phase} | {name} | {len(times)} | {percentile(times, 50):.0f} | {percentile(times, 95):.0f} "
                    f"| {max(times):.0f} | {dict(others) or '-'} |"
                )


def drill(*, seconds: float, export_memories: int) -> None:
    service = Service(baseline=False)
    print(f"### drill: ./scripts/run on 127.0.0.1:{service.port}, data in {service.scratch}")
    try:
        service.start()
        household = printed(service.manage("shell", "-c", HOUSEHOLD_SETUP), "HOUSEHOLD")
        export = big_export(service, household, memories=export_memories)
        probes, writer = Probes(service.port, household), Writer(service.port, household)
        probes.start()
        writer.start()
        probes.phase = "1 quiet"
        time.sleep(seconds)
        probes.phase = "2 slow readers"
        readers = SlowReaders(service.port, heads(service.port, export))
        readers.start()
        time.sleep(seconds)
        readers.stopped.set()
        readers.join()
        print(f"  slow readers opened {dict(readers.opened)}, dropped by the server {dict(readers.drops)}")
        probes.phase = "3 held lock"
        held_lock(service, seconds)
        probes.phase = "4 port squatter"
        code, took, line = squatter(service)
        print(f"  the squatter exited {code} after {took:.1f} s: {line}")
        probes.phase = "5 limit-length texts"
        answers = limit_texts(service, household, seconds)
        print(f"  limit-length remembers (language, status): {dict(answers)}")
        probes.phase = "6 after"
        time.sleep(min(seconds, 5))
        probes.stopped.set()
        writer.stopped.set()
        probes.join()
        writer.join()
        import psycopg

        with psycopg.connect(**{**service.connection_params(), "dbname": DATABASE_NAME}) as conn:
            found = conn.execute(
                "SELECT count(*) FROM memories_memory WHERE id = ANY(%s)", [writer.acknowledged]
            ).fetchone()[0]
        print(
            f"  writer: {len(writer.acknowledged)} acknowledged, {found} of them stored; "
            f"refused {dict(writer.refused) or 'none'}"
        )
        report(probes)
    finally:
        took = service.stop()
        print(f"  stopped by SIGTERM in {took:.1f} s" if took is not None else "  had to be killed (SIGKILL)")
        service.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per phase (default 20)")
    parser.add_argument("--export-memories", type=int, default=6000, help="memories in the exported person's data")
    args = parser.parse_args()
    drill(seconds=args.seconds, export_memories=args.export_memories)


if __name__ == "__main__":
    main()
