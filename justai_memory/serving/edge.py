"""What the service answers at its edge, outside any endpoint: a foreign Host, overload, a database that is down.

- **Host** outside ``DJANGO_ALLOWED_HOSTS``: Django refuses it (``DisallowedHost``) before any view;
  ``bad_request`` (``handler400``) answers API paths in the API's JSON contract, naming ``Host``.
- **Slow clients**: a request's body is read whole before it counts (``Admission``), within
  ``WEB_READ_TIMEOUT`` s (else a JSON 408) and ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (else a JSON 413);
  its head has the same time (``Deadlines``, the uvicorn worker's protocol in gunicorn_conf.py). So a
  slow upload costs a socket and its bytes so far, never a place among the requests being served. A request
  counts until its answer starts; a client that reads nothing of it for ``WEB_SEND_TIMEOUT`` s is reset.
- **Slow statements**: a web request's statements have ``WEB_STATEMENT_TIMEOUT`` s each (the admin's
  ``ADMIN_STATEMENT_TIMEOUT``, ``AdminStatementTimeoutMiddleware``); past it a JSON 503 "busy" with Retry-After.
- **Overload**: ``Admission`` runs at most ``DATABASE_POOL_MAX_SIZE`` requests at once in a worker (one
  per pooled connection); the others wait for their turn up to ``WEB_QUEUE_TIMEOUT`` s, at most
  ``WEB_WORKER_CONNECTIONS`` admitted at once; past either a JSON 503 "busy" with ``Retry-After``
  (uvicorn's own ``limit_concurrency`` would answer text/plain, without Retry-After). Plain ASGI, no Django.
  A pool that still times out (``PoolTimeout``) is "busy" too, never "the database is unreachable".
- **Database down**: ``DatabaseUnavailableMiddleware`` answers a view's ``OperationalError`` or
  ``InterfaceError`` with a 503 and ``Retry-After``: a short HTML page for the admin (no traceback),
  JSON for API paths (whose endpoints answer it themselves, api/errors.py).
"""

import asyncio
import collections
import json
import sys

from django.core.exceptions import DisallowedHost
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults

from justai_memory.api.errors import (
    BUSY_WAITED,
    NOT_FOUND,
    RETRY_AFTER_BUSY,
    RETRY_AFTER_DATABASE,
    UNAVAILABLE,
    busy_response,
    database_error_answer,
    error_response,
    internal_error,
)
from justai_memory.api.parser import body_too_large

# Paths that answer programs in JSON (justai_memory/urls.py): the internal API, the MCP endpoint, the OAuth endpoints
# a client calls itself and the metadata documents. The admin and the consent page are HTML for a browser.
API_PATHS = ("/internal/", "/mcp", "/oauth/token/", "/oauth/revoke/", "/oauth/register/", "/.well-known/")
OAUTH_PATHS = ("/oauth/",)  # their errors are RFC 6749's: error + error_description (connections/oauth_endpoints.py)
# Where a missing page is a page (the admin's, in the browser's language); any other unknown path is a JSON 404.
PAGE_PATHS = ("/admin/",)
HOST_NOT_ALLOWED = "The Host header names no host this service answers to (DJANGO_ALLOWED_HOSTS)."
BAD_REQUEST = "Bad request."
BUSY = "The server is busy: more than {limit} requests at once in this worker; try again shortly."
BODY_TOO_SLOW = "The request body did not arrive within {seconds} s."
DATABASE_PAGE = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>Database unavailable</title></head><body>"
    "<h1>Database unavailable (503)</h1><p>The database cannot be reached right now. The service reconnects by "
    "itself: try again in a few seconds.</p></body></html>"
)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PATHS)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler400: a foreign Host (DisallowedHost) and other refused requests, in JSON on API paths."""
    if not _is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, DisallowedHost):
        return error_response(HOST_NOT_ALLOWED, field="Host")
    return error_response(BAD_REQUEST)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404: a path no pattern matches (one with a line feed, which no pattern's ``.`` takes): JSON but in the admin."""
    if request.path.startswith(PAGE_PATHS):
        return defaults.page_not_found(request, exception)
    return error_response(NOT_FOUND, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: an error outside the API's own handlers (a middleware's) is still JSON on API paths, with the
    API's error id in the answer and the log. Django calls it while handling the exception."""
    if not _is_api(request):
        return defaults.server_error(request)
    return internal_error(request, sys.exception())


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """The 503 while the database cannot be reached: JSON on API paths, a short page elsewhere."""
    if _is_api(request):
        response = error_response(UNAVAILABLE, status=503)
    else:
        response = HttpResponse(DATABASE_PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_DATABASE)
    return response


def connections_returned(get_response):
    """Outermost middleware: a whole answer's database connections go back to the pool before it is sent.

    So a client that reads slowly holds no connection while its answer goes out (edge.Admission frees the request's
    place when the answer starts). Only with the pool (web processes); a streaming answer (a static file) keeps
    them, and none of the project's reads the database while it streams.
    """
    from django.conf import settings
    from django.db import close_old_connections

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if settings.DATABASE_POOL and not response.streaming:
            close_old_connections()
        return response

    return middleware


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """A view that cannot reach the database answers 503 with Retry-After, not a 500 with Django's error page."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError)):
            return database_error_response(request, exception)
        return None


def refusal(path: str, error: str, field: str | None, *, oauth_error: str = "invalid_request") -> dict:
    """The body of a refusal the edge answers itself: on the OAuth endpoints RFC 6749's ``oauth_error`` with the
    message as its description, elsewhere the API's ``error`` and ``field``."""
    if path.startswith(OAUTH_PATHS):
        return {"error": oauth_error, "error_description": error}
    return {"error": error, "field": field}


def database_error_response(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A database error's answer outside the API's handlers: "busy" (JSON 503), or the database-down 503."""
    message, _status, _retry_after = database_error_answer(exception)
    if message != UNAVAILABLE:
        return busy_response(request, message)
    return database_unavailable(request)


class AdminStatementTimeoutMiddleware:
    """The admin's pages and actions run their statements under ADMIN_STATEMENT_TIMEOUT, not a web request's limit.

    Only with the pool (web processes), which gives each connection back with its own limit (``RESET``, settings).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        from django.conf import settings
        from django.db import connection

        if settings.DATABASE_POOL and request.path.startswith(PAGE_PATHS):
            limit = f"{settings.ADMIN_STATEMENT_TIMEOUT}s"
            try:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('statement_timeout', %s, false)", [limit])
            except (OperationalError, InterfaceError) as exc:  # a middleware's error would be a 500, not the 503
                return database_error_response(request, exc)
        return self.get_response(request)


async def send_json(send, status: int, body: dict, headers: list[tuple[bytes, bytes]] = ()) -> None:
    """One whole JSON answer on a plain ASGI ``send``."""
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def send_busy(send, error: str, path: str) -> None:
    """The JSON 503 "busy", with Retry-After (on the OAuth endpoints RFC 6749's ``temporarily_unavailable``)."""
    await send_json(
        send,
        503,
        refusal(path, error, None, oauth_error="temporarily_unavailable"),
        [(b"retry-after", str(RETRY_AFTER_BUSY).encode()), (b"connection", b"close")],
    )


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


async def body_read(receive, *, max_bytes: int) -> bytes:
    """The whole body of an HTTP request from ASGI ``receive``; BodyTooLarge past ``max_bytes``, ClientGone on a disconnect."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def body_replayed(body: bytes, receive):
    """An ASGI ``receive`` that gives ``body`` whole once, then what the client sends (its disconnect)."""
    given = False

    async def replay():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class Admission:
    """Which HTTP requests of this worker process run, wait for their turn, or are told "busy" (a JSON 503, Retry-After).

    - A request counts once its body has arrived: the body is read first, within ``read_timeout`` s and
      ``max_body`` bytes (a JSON 408 or 413 otherwise), so slow or stalled uploads, however many, hold no place.
    - At most ``running`` requests run at once: one per connection of the worker's database pool (a request
      runs Django's code on a thread of its own and holds one connection), so none waits for the pool.
    - The others wait for their turn, first come first served, at most ``wait`` s; then "busy". At most
      ``limit`` requests are admitted at once, running or waiting; the next is told "busy" at once.
    - A request counts until its answer starts: a client that reads its answer slowly holds no place (the send
      deadline, gunicorn_conf.Deadlines, ends it). Ungated requests (static files: no database) wait for no turn.

    One event loop per worker: plain counters and futures, no locks.
    """

    def __init__(self, *, running: int, limit: int, wait: float, read_timeout: float = 10.0, max_body: int = 2_621_440):
        self.running_max, self.limit, self.wait = max(1, min(running, limit)), limit, wait
        self.read_timeout, self.max_body = read_timeout, max_body
        self.admitted = 0  # running or waiting
        self.running = 0
        self.waiting: collections.deque[asyncio.Future] = collections.deque()

    async def serve(self, app, scope, receive, send, *, gated: bool = True) -> None:
        """Read the body, then run ``app`` in its turn; ``gated=False`` (static files, no database) needs no turn."""
        try:
            async with asyncio.timeout(self.read_timeout):
                body = await body_read(receive, max_bytes=self.max_body)
        except TimeoutError:
            error = BODY_TOO_SLOW.format(seconds=f"{self.read_timeout:g}")
            await send_json(send, 408, refusal(scope.get("path", ""), error, "body"), [(b"connection", b"close")])
            return
        except BodyTooLarge:
            error = body_too_large(self.max_body)
            await send_json(send, 413, refusal(scope.get("path", ""), error, "body"), [(b"connection", b"close")])
            return
        except ClientGone:
            return
        if self.admitted >= self.limit:
            await send_busy(send, BUSY.format(limit=self.limit), scope.get("path", ""))
            return
        self.admitted += 1
        running = answered = False

        async def send_answering(message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                self._leave(running=running)
            await send(message)

        try:
            if gated:
                running = await self._turn()
                if not running:
                    await send_busy(send, BUSY_WAITED.format(seconds=f"{self.wait:g}"), scope.get("path", ""))
                    return
            await app(scope, body_replayed(body, receive), send_answering)
        finally:
            if not answered:
                self._leave(running=running)

    def _leave(self, *, running: bool) -> None:
        """A request's answer started (or it ended): it counts no more, and its place serves the next.

        The answer holds no database connection (``connections_returned``); its body goes out at the client's pace,
        under the send deadline (gunicorn_conf.Deadlines), and a slow reader makes nobody wait.
        """
        self.admitted -= 1
        if running:
            self._release()

    async def _turn(self) -> bool:
        """Whether this request may run: at once, or once one that runs hands over its place within ``wait`` s."""
        if self.running < self.running_max and not self.waiting:
            self.running += 1
            return True
        turn = asyncio.get_running_loop().create_future()
        self.waiting.append(turn)
        try:
            async with asyncio.timeout(self.wait):
                await turn
            return True
        except TimeoutError:
            return turn.done() and not turn.cancelled()  # handed its place just as the wait ended: it runs
        except BaseException:  # the request was cancelled (the server stops): a place handed to it goes on
            if turn.done() and not turn.cancelled():
                self._release()
            raise
        finally:
            if turn in self.waiting:
                self.waiting.remove(turn)

    def _release(self) -> None:
        """A request ended: its place goes to the first that still waits, else it is free."""
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.running -= 1
