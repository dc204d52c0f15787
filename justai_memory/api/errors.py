"""The internal API's exception handlers: whatever its views, auth and parser raise is answered in the error
contract of edge/errors.py (``{"error", "field"}``), naming the field and never echoing what was sent."""

import logging

from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from justai_core.errors import ApplicationError, with_source
from justai_memory.api.parser import BODY_NOT_OBJECT
from justai_memory.edge.errors import (
    NOT_FOUND,
    UNAVAILABLE,
    body_too_large,
    busy_response,
    database_error_answer,
    dotted,
    error_response,
    internal_error,
    validation_message,
)

logger = logging.getLogger(__name__)

UNAUTHORIZED = "Missing or wrong bearer token."
METHOD_NOT_ALLOWED = "Method {method} not allowed; allowed: {allowed}."


def field_path(loc: tuple) -> str:
    """``("body", "payload", "turns", 2, "text")`` -> ``turns[2].text``; the body itself is ``body``."""
    source, parts = (loc[0], loc[2:]) if loc and loc[0] == "body" else (None, loc[1:] if loc else ())
    return dotted(parts) or (source or "body")


def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    error = exc.errors[0]
    field = field_path(tuple(error["loc"]))
    if field == "body" and error["type"] in ("missing", "model_type", "dict_type"):
        return error_response(BODY_NOT_OBJECT, field="body")
    return error_response(validation_message(error, field), field=field)


def _application_error(request: HttpRequest, exc: ApplicationError) -> HttpResponse:
    message = with_source(exc.message, exc.needs) if exc.needs else exc.message  # the field it needs: its own name
    return error_response(message, field=exc.field, status=exc.status)


def _django_validation_error(request: HttpRequest, exc: DjangoValidationError) -> HttpResponse:
    if hasattr(exc, "error_dict"):
        field, errors = next(iter(exc.message_dict.items()))
        return error_response(" ".join(errors), field=field)
    return error_response(" ".join(exc.messages))


def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if isinstance(exc.__cause__, ApplicationError):  # ninja wraps what the body parser raises
        return _application_error(request, exc.__cause__)
    return error_response(str(exc), status=exc.status_code)


def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(UNAUTHORIZED, field="Authorization", status=401)


def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(NOT_FOUND, status=404)


def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return error_response(body_too_large(), field="body", status=413)


def _unavailable(request: HttpRequest, exc: Exception) -> HttpResponse:
    message, status, retry_after = database_error_answer(exc)
    if message != UNAVAILABLE:
        return busy_response(request, message)
    logger.warning("Internal API: database unreachable (%s) on %s %s", type(exc).__name__, request.method, request.path)
    response = error_response(message, status=status)
    response["Retry-After"] = retry_after
    return response


def install_error_handlers(api: NinjaAPI) -> None:
    """Answer every exception the API's views, auth and parser raise in the JSON contract."""
    handlers = {
        ApplicationError: _application_error,
        DjangoValidationError: _django_validation_error,
        ValidationError: _validation_error,
        HttpError: _http_error,
        AuthenticationError: _unauthorized,
        Http404: _not_found,
        RequestDataTooBig: _too_big,
        OperationalError: _unavailable,
        InterfaceError: _unavailable,
        Exception: internal_error,
    }
    for exc_class, handler in handlers.items():
        api.add_exception_handler(exc_class, handler)
