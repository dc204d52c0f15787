"""The error contract the API, MCP and the edge share: every answer that is not a success is JSON ``{"error", "field"}``.

Validation errors name the field path (``query``, ``turns[2].text``) and never echo what was sent.
An unexpected exception is a 500 with an error id that is also logged, with the stack but without
the exception's message: PostgreSQL puts the failing row (memory text) into some of them.
The API's exception handlers that answer in this shape are api/errors.py's.
"""

import logging
import uuid

from django.http import HttpRequest, HttpResponse, JsonResponse
from pydantic import ValidationError as PydanticValidationError

from justai_memory.serving.log_format import traceback_without_messages
from memories.limits import MAX_BODY_BYTES

logger = logging.getLogger(__name__)

NOT_FOUND = "No such endpoint: see /internal/v1/openapi.json."
UNAVAILABLE = "The database is unreachable; try again shortly."
RETRY_AFTER_DATABASE = 5  # seconds: the supervisor restarts a dead database after 1 s, then crash recovery
BUSY_WAITED = "The server is busy: no database connection became free within {seconds} s; try again shortly."
BUSY_TOO_LONG = "The server is busy: the request did not finish within {seconds} s; try again shortly."
RETRY_AFTER_BUSY = 1  # seconds
PROBE_SECONDS = 2  # after a pool's timeout: does the database answer a connection of its own?
INTERNAL = "Internal error {error_id}; the log has the details under this id."
BODY_TOO_LARGE = (
    "The request body is larger than {limit} bytes."  # the API's bound (api/parser.py), the server's at its edge
)

# Messages for pydantic's error types; others fall back to pydantic's own message (which never holds the input).
MESSAGES = {
    "missing": "'{field}' is required.",
    "string_type": "'{field}' must be a string.",
    "int_type": "'{field}' must be an integer.",
    "int_parsing": "'{field}' must be an integer.",
    "int_from_float": "'{field}' must be an integer.",
    "float_type": "'{field}' must be a number.",
    "bool_type": "'{field}' must be true or false.",
    "bool_parsing": "'{field}' must be true or false.",
    "list_type": "'{field}' must be a list.",
    "dict_type": "'{field}' must be a JSON object.",
    "model_type": "'{field}' must be a JSON object.",
    "string_too_short": "'{field}' must not be empty.",
    "string_too_long": "'{field}' is longer than {max_length} characters.",
    "too_short": "'{field}' must hold at least {min_length} items.",
    "too_long": "'{field}' must hold at most {max_length} items.",
    "string_pattern_mismatch": "'{field}' does not have the expected form ({pattern}).",
    "literal_error": "'{field}' must be one of: {expected}.",
    "greater_than_equal": "'{field}' must be at least {ge}.",
    "less_than_equal": "'{field}' must be at most {le}.",
}


def error_response(message: str, *, field: str | None = None, status: int = 400) -> JsonResponse:
    """The one shape of every error answer."""
    return JsonResponse({"error": message, "field": field}, status=status)


def body_too_large(limit: int = MAX_BODY_BYTES) -> str:
    """The 413's message, for the API's bound (MAX_BODY_BYTES) or the server's (serving/admission.py)."""
    return BODY_TOO_LARGE.format(limit=limit)


def dotted(parts: tuple) -> str:
    """``("turns", 2, "text")`` -> ``turns[2].text``."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def validation_message(error: dict, field: str) -> str:
    template = MESSAGES.get(error["type"])
    ctx = dict(error.get("ctx") or {})
    if error["type"] == "literal_error":
        ctx["expected"] = ctx.get("expected", "").replace("'", "").replace(" or ", ", ")
    if template is not None:
        try:
            return template.format(field=field, **ctx)
        except (KeyError, IndexError):
            pass
    message = error["msg"]  # ours ("must not contain ...") read on from the field name; pydantic's are sentences
    return f"'{field}' {message}." if message[:1].islower() else f"'{field}': {message}."


def validation_messages(exc: PydanticValidationError) -> str:
    """Every error of a pydantic model's validation in these words, for arguments outside a request body (the MCP
    tools'): "'scope' must be one of: shared, room, private." """
    return " ".join(validation_message(error, dotted(tuple(error["loc"]))) for error in exc.errors())


def pool_exhausted(exc: BaseException, pool) -> bool:
    """Whether a database error is ``pool``'s timeout while the database is up (it answers a connection of its own):
    every pooled connection is in use, the worker is busy. A pool that cannot connect times out too: then it is down."""
    from psycopg_pool import PoolTimeout

    seen = set()
    while exc is not None and id(exc) not in seen and not isinstance(exc, PoolTimeout):
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    if not isinstance(exc, PoolTimeout) or pool is None:
        return False
    import psycopg

    # The pool's own figures cannot tell: a connection it is still trying to open counts as one in use. A
    # connection of our own can (rare: admission runs no more requests than the pool holds; serving/admission.py).
    try:
        psycopg.connect(**{**pool.kwargs, "connect_timeout": PROBE_SECONDS}).close()
    except psycopg.Error:
        return False
    return True


def default_pool():
    """The web process's pool of the default database (None without one)."""
    from django.db import connections

    return connections["default"].pool


def statement_timed_out(exc: BaseException) -> bool:
    """Whether a database error is a statement cancelled at its time limit (``statement_timeout``, settings)."""
    from psycopg.errors import QueryCanceled

    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, QueryCanceled):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def database_error_answer(exc: BaseException) -> tuple[str, int, str]:
    """What a client is told of a database error, naming no internals: (message, status, Retry-After seconds).

    "busy" for a statement past its time limit or a pool whose every connection stayed in use; "unreachable"
    otherwise. The API, the edge's middleware and the MCP tools answer with it.
    """
    from django.conf import settings

    if statement_timed_out(exc):
        return BUSY_TOO_LONG.format(seconds=f"{settings.DATABASE_STATEMENT_TIMEOUT:g}"), 503, str(RETRY_AFTER_BUSY)
    if pool_exhausted(exc, default_pool()):
        seconds = settings.DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("timeout", 0)
        return BUSY_WAITED.format(seconds=f"{seconds:g}"), 503, str(RETRY_AFTER_BUSY)
    return UNAVAILABLE, 503, str(RETRY_AFTER_DATABASE)


def busy_response(request: HttpRequest, message: str) -> HttpResponse:
    """The JSON 503 "busy" with Retry-After; a WARNING, not Django's ERROR for a 503."""
    logger.warning("busy on %s %s: %s", request.method, request.path, message)
    response = error_response(message, status=503)
    response["Retry-After"] = str(RETRY_AFTER_BUSY)
    response._has_been_logged = True  # django.request would log a 503 as an ERROR
    return response


def internal_error(request: HttpRequest, exc: BaseException | None) -> HttpResponse:
    """A 500 whose id is in the log next to the stack (without the exception's message, which may hold content).

    The API's own handler and the edge's handler500 (edge/answers.py, ``exc`` the exception being handled) answer it.
    """
    error_id = uuid.uuid4().hex[:12]
    stack = "" if exc is None else traceback_without_messages(exc)
    logger.error(
        "Internal API error %s: %s on %s %s\n%s", error_id, type(exc).__qualname__, request.method, request.path, stack
    )
    return error_response(INTERNAL.format(error_id=error_id), status=500)
