"""What the service answers at its edge, outside any endpoint: a foreign Host, a database that is down, a refusal.

- **Host** outside ``DJANGO_ALLOWED_HOSTS``: Django refuses it (``DisallowedHost``) before any view;
  ``bad_request`` (``handler400``) answers API paths in the API's JSON contract, naming ``Host``.
- **Slow statements**: a web request's statements have ``WEB_STATEMENT_TIMEOUT`` s each (the admin's
  ``ADMIN_STATEMENT_TIMEOUT``, ``AdminStatementTimeoutMiddleware``); past it a JSON 503 "busy" with Retry-After.
- **Database down**: ``DatabaseUnavailableMiddleware`` answers a view's ``OperationalError`` or
  ``InterfaceError`` with a 503 and ``Retry-After``: a short HTML page for the admin (no traceback),
  JSON for API paths (whose endpoints answer it themselves, api/errors.py).
- **Refusals sent on plain ASGI** (the admission's 408, 413 and "busy" in serving/admission.py, MCP's Host and
  token checks in mcp/auth.py): ``refusal`` is their body (RFC 6749's on the OAuth endpoints), ``send_json`` sends it.
"""

import json
import sys

from django.core.exceptions import DisallowedHost
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin
from django.views import defaults

from justai_memory.edge.errors import (
    NOT_FOUND,
    RETRY_AFTER_BUSY,
    RETRY_AFTER_DATABASE,
    UNAVAILABLE,
    busy_response,
    database_error_answer,
    error_response,
    internal_error,
)

# Paths that answer programs in JSON (justai_memory/urls.py): the internal API, the MCP endpoint, the OAuth endpoints
# a client calls itself and the metadata documents. The admin and the consent page are HTML for a browser.
API_PATHS = ("/internal/", "/mcp", "/oauth/token/", "/oauth/revoke/", "/oauth/register/", "/.well-known/")
OAUTH_PATHS = ("/oauth/",)  # their errors are RFC 6749's: error + error_description (connections/oauth_endpoints.py)
# Where a missing page is a page (the admin's, in the browser's language); any other unknown path is a JSON 404.
PAGE_PATHS = ("/admin/",)
HOST_NOT_ALLOWED = "The Host header names no host this service answers to (DJANGO_ALLOWED_HOSTS)."
BAD_REQUEST = "Bad request."
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

    So a client that reads slowly holds no connection while its answer goes out (serving/admission.py's ``Admission`` frees the request's
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
