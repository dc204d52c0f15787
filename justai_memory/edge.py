"""What the service answers at its edge, outside any endpoint: a foreign Host, overload, a database that is down.

- **Host** outside ``DJANGO_ALLOWED_HOSTS``: Django refuses it (``DisallowedHost``) before any view;
  ``bad_request`` (``handler400``) answers API paths in the API's JSON contract, naming ``Host``.
- **Slow clients**: a request's body is read whole before it counts (``ConcurrencyLimit``), within
  ``WEB_READ_TIMEOUT`` s (else a JSON 408) and ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (else a JSON 413);
  its head has the same time (``HeadDeadline``, the uvicorn worker's protocol in gunicorn_conf.py). So a
  slow upload costs a socket and its bytes so far, never a place among the requests being served.
- **Overload**: ``ConcurrencyLimit`` lets at most ``WEB_WORKER_CONNECTIONS`` requests into a worker
  at once and answers the next ones at once with a JSON 503 and ``Retry-After`` (uvicorn's own
  ``limit_concurrency`` would answer text/plain, without Retry-After). Plain ASGI, no Django.
- **Database down**: ``DatabaseUnavailableMiddleware`` answers a view's ``OperationalError`` or
  ``InterfaceError`` with a 503 and ``Retry-After``: a short HTML page for the admin (no traceback),
  JSON for API paths (whose endpoints answer it themselves, api/errors.py).
"""

import asyncio
import json

from django.core.exceptions import DisallowedHost
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults

from justai_memory.api.errors import RETRY_AFTER_DATABASE, UNAVAILABLE, error_response

# Paths that answer programs in JSON (justai_memory/urls.py): the internal API, the OAuth endpoints a client
# calls itself and the metadata documents. Everything else (admin, the consent page) is HTML for a browser.
API_PATHS = ("/internal/", "/oauth/token/", "/oauth/revoke/", "/oauth/register/", "/.well-known/")
HOST_NOT_ALLOWED = "The Host header names no host this service answers to (DJANGO_ALLOWED_HOSTS)."
BAD_REQUEST = "Bad request."
INTERNAL = "Internal error; the log has the details."
BUSY = "The server is busy: more than {limit} requests at once in this worker; try again shortly."
RETRY_AFTER_BUSY = 1  # seconds
BODY_TOO_SLOW = "The request body did not arrive within {seconds} s."
BODY_TOO_LARGE = "The request body is larger than {limit} bytes."
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


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: an error outside the API's own handlers (a middleware's) is still JSON on API paths."""
    if not _is_api(request):
        return defaults.server_error(request)
    return error_response(INTERNAL, status=500)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """The 503 while the database cannot be reached: JSON on API paths, a short page elsewhere."""
    if _is_api(request):
        response = error_response(UNAVAILABLE, status=503)
    else:
        response = HttpResponse(DATABASE_PAGE, status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_DATABASE)
    return response


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """A view that cannot reach the database answers 503 with Retry-After, not a 500 with Django's error page."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, (OperationalError, InterfaceError)):
            return database_unavailable(request)
        return None


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


class ConcurrencyLimit:
    """At most ``limit`` HTTP requests at once in this worker process; the next get a JSON 503 with Retry-After.

    A request counts once its body has arrived, until its answer is sent: the body is read first, within
    ``read_timeout`` s and ``max_body`` bytes (a JSON 408 or 413 otherwise), so that slow or stalled uploads,
    however many, hold no place. One event loop per worker: plain counters are enough.
    """

    def __init__(self, limit: int, *, read_timeout: float = 10.0, max_body: int = 2_621_440):
        self.limit, self.read_timeout, self.max_body = limit, read_timeout, max_body
        self.active = 0

    async def serve(self, app, scope, receive, send) -> None:
        try:
            async with asyncio.timeout(self.read_timeout):
                body = await body_read(receive, max_bytes=self.max_body)
        except TimeoutError:
            error = BODY_TOO_SLOW.format(seconds=f"{self.read_timeout:g}")
            await send_json(send, 408, {"error": error, "field": "body"}, [(b"connection", b"close")])
            return
        except BodyTooLarge:
            error = BODY_TOO_LARGE.format(limit=self.max_body)
            await send_json(send, 413, {"error": error, "field": "body"}, [(b"connection", b"close")])
            return
        except ClientGone:
            return
        if self.active >= self.limit:
            await send_json(
                send,
                503,
                {"error": BUSY.format(limit=self.limit), "field": None},
                [(b"retry-after", str(RETRY_AFTER_BUSY).encode()), (b"connection", b"close")],
            )
            return
        self.active += 1
        try:
            await app(scope, body_replayed(body, receive), send)
        finally:
            self.active -= 1
