"""ASGI entry point of the web server (gunicorn with uvicorn workers): Django, plus apps mounted at a prefix.

Mount hook: ``mount("/mcp", app)`` below this module's Django setup routes every request whose path
is the prefix or starts with ``prefix + "/"`` to ``app``; everything else goes to Django. The mounted
app gets the full ``path`` and ``root_path`` set to the prefix (the ASGI / Starlette convention: a
Starlette app routes on the path after root_path). Lifespan events (startup, shutdown) are passed on
to every mounted app, in mount order on startup and in reverse on shutdown: an app that needs a
running task group (the MCP SDK's session manager) gets it from its own lifespan. Django has no
lifespan; at startup each worker loads the embedder so that the first recall is not slowed by it.

Overload: at most WEB_WORKER_CONNECTIONS requests at once per worker, then a JSON 503 with Retry-After
(``justai_memory.edge.ConcurrencyLimit``, inside the access log so that its 503s are logged).

Access log: one line per request with method, path (never the query string: admin searches and
recall previews carry memory text there), status and duration; uvicorn's own access log is off.
"""

import asyncio
import logging
import os
import time
import warnings

# WhiteNoise answers with sync file iterators; Django reads them in a thread under ASGI (admin files are small).
warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume synchronous iterators")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
# Web processes borrow connections from a bounded pool (they never fork after using the database).
os.environ.setdefault("DATABASE_POOL", "true")

from django.core.asgi import get_asgi_application  # noqa: E402

django_application = get_asgi_application()

access_log = logging.getLogger("justai_memory.access")
logger = logging.getLogger(__name__)

_mounts: list[tuple[str, object]] = []


def mount(prefix: str, app) -> None:
    """Route ``prefix`` and everything under it to the ASGI ``app`` (call at import time, before serving)."""
    if not prefix.startswith("/") or prefix.endswith("/"):
        raise ValueError(f"A mount prefix starts with '/' and does not end with one: {prefix!r}")
    _mounts.append((prefix, app))


# The MCP server (justai_memory/mcp_server.py): its own auth, Host check and lifespan (the SDK's session manager).
from justai_memory.mcp_server import application as mcp_application  # noqa: E402 (needs Django set up)

mount("/mcp", mcp_application)

from django.conf import settings  # noqa: E402

from justai_memory.edge import ConcurrencyLimit  # noqa: E402

concurrency_limit = ConcurrencyLimit(settings.WEB_WORKER_CONNECTIONS)


def _mounted_app(path: str):
    for prefix, app in _mounts:
        if path == prefix or path.startswith(prefix + "/"):
            return prefix, app
    return None, None


def _embedder_warm() -> None:
    from django.db import connections

    from memories.services.embeddings import active_embedder

    try:
        active_embedder().blocks()  # and the one its forget blocks are checked with (Embedder.block_embedder)
    except Exception as exc:  # reported by the health check; the worker still serves
        logger.warning("embedder not loaded at start: %s", exc)
    finally:
        connections.close_all()


class _Lifespan:
    """Runs one mounted app's lifespan protocol in a task, driven by startup() and shutdown()."""

    def __init__(self, app, scope):
        self.app, self.scope = app, scope
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.outbox: asyncio.Queue = asyncio.Queue()
        self.task: asyncio.Task | None = None

    async def _run(self):
        try:
            await self.app(self.scope, self.inbox.get, self.outbox.put)
        except Exception as exc:  # an app without lifespan support raises on the scope type: it needs none
            await self.outbox.put({"type": "lifespan.unsupported", "message": str(exc)})

    async def _exchange(self, message_type: str) -> None:
        await self.inbox.put({"type": message_type})
        answer = await self.outbox.get()
        if answer["type"].endswith(".failed"):
            raise RuntimeError(answer.get("message") or message_type + " failed")

    async def startup(self) -> None:
        self.task = asyncio.create_task(self._run())
        await self._exchange("lifespan.startup")

    async def shutdown(self) -> None:
        if self.task and not self.task.done():
            await self._exchange("lifespan.shutdown")
            await self.task


async def _lifespan(scope, receive, send) -> None:
    running: list[_Lifespan] = []
    message = await receive()  # lifespan.startup
    try:
        for _prefix, app in _mounts:
            lifespan = _Lifespan(app, scope)
            await lifespan.startup()
            running.append(lifespan)
        await asyncio.to_thread(_embedder_warm)
    except Exception as exc:
        logger.exception("startup failed")
        await send({"type": "lifespan.startup.failed", "message": str(exc)})
        return
    await send({"type": "lifespan.startup.complete"})
    message = await receive()  # lifespan.shutdown
    assert message["type"] == "lifespan.shutdown"
    try:
        for lifespan in reversed(running):
            await lifespan.shutdown()
    except Exception as exc:
        await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
        return
    await send({"type": "lifespan.shutdown.complete"})


async def application(scope, receive, send) -> None:
    if scope["type"] == "lifespan":
        await _lifespan(scope, receive, send)
        return
    prefix, app = _mounted_app(scope.get("path", ""))
    if app is not None:
        scope = {**scope, "root_path": scope.get("root_path", "") + prefix}
    else:
        app = django_application
    if scope["type"] != "http":
        await app(scope, receive, send)
        return
    started = time.monotonic()
    status = 0

    async def send_and_note(message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    try:
        await concurrency_limit.serve(app, scope, receive, send_and_note)
    finally:
        client = (scope.get("client") or ("-",))[0]
        access_log.info(
            '%s "%s %s" %s %.0fms',
            client,
            scope["method"],
            scope["path"],
            status or "-",
            (time.monotonic() - started) * 1000,
        )
