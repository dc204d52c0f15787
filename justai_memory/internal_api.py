"""Plumbing for the internal JSON API: bearer-token auth, JSON parsing, field readers, errors as JSON 4xx."""

import functools
import hmac
import json
import logging
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from justai_memory.errors import ApplicationError

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
MAX_TEXT_CHARS = 4000  # documented limit for memory texts, queries and turns


def error_response(message: str, *, field: str | None = None, status: int = 400) -> JsonResponse:
    body = {"error": message}
    if field:
        body["field"] = field
    return JsonResponse(body, status=status)


def _token_ok(request: HttpRequest) -> bool:
    return bearer_token_valid(request.headers.get("Authorization", ""))


def bearer_token_valid(header: str) -> bool:
    """Whether an ``Authorization`` header value carries one of INTERNAL_API_TOKENS (the JSON API and MCP)."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    # Compare against every configured token so timing says nothing about which one nearly matched.
    matched = False
    for configured in settings.INTERNAL_API_TOKENS:
        matched |= hmac.compare_digest(token.strip().encode(), configured.encode())
    return matched


def api_view(*, methods: tuple[str, ...]) -> Callable:
    """Wrap an internal view ``view(request, payload)``: auth, method check, JSON in, errors out as JSON 4xx."""

    def decorator(view: Callable) -> Callable:
        @csrf_exempt
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs):
            if not settings.INTERNAL_API_TOKENS:
                return error_response("The internal API is closed: no INTERNAL_API_TOKENS configured.", status=403)
            if not _token_ok(request):
                return error_response("Missing or wrong bearer token.", field="Authorization", status=401)
            if request.method not in methods:
                response = error_response(f"Method {request.method} not allowed.", status=405)
                response["Allow"] = ", ".join(methods)
                return response
            payload: dict = {}
            if request.method == "POST":
                if len(request.body) > MAX_BODY_BYTES:
                    return error_response(f"Body over {MAX_BODY_BYTES} bytes.", status=413)
                try:
                    payload = json.loads(request.body or b"null")
                except (ValueError, UnicodeDecodeError):
                    return error_response("Body is not valid JSON.", field="body")
                if not isinstance(payload, dict):
                    return error_response("Body must be a JSON object.", field="body")
            try:
                return view(request, payload, *args, **kwargs)
            except ApplicationError as exc:
                return error_response(exc.message, field=exc.field, status=exc.status)
            except ValidationError as exc:
                if hasattr(exc, "error_dict"):
                    field, errors = next(iter(exc.message_dict.items()))
                    return error_response(" ".join(errors), field=field)
                return error_response(" ".join(exc.messages))

        return wrapper

    return decorator


def read_str(payload: dict, field: str, *, required: bool = True, max_chars: int = MAX_TEXT_CHARS) -> str | None:
    """A non-empty string (stripped) of at most ``max_chars``; None when optional and absent."""
    value = payload.get(field)
    if value is None:
        if required:
            raise ApplicationError(f"'{field}' is required.", field=field)
        return None
    if not isinstance(value, str):
        raise ApplicationError(f"'{field}' must be a string.", field=field)
    value = value.strip()
    if not value:
        raise ApplicationError(f"'{field}' must not be empty.", field=field)
    if len(value) > max_chars:
        raise ApplicationError(f"'{field}' is longer than {max_chars} characters.", field=field)
    return value


def read_int(payload: dict, field: str, *, required: bool = True) -> int | None:
    """An integer id (not a bool, not a float); None when optional and absent."""
    value = payload.get(field)
    if value is None:
        if required:
            raise ApplicationError(f"'{field}' is required.", field=field)
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApplicationError(f"'{field}' must be an integer.", field=field)
    return value


def read_choice(payload: dict, field: str, choices, *, default: str | None = None) -> str:
    """One of ``choices`` (a TextChoices class or a list of strings)."""
    allowed = list(getattr(choices, "values", choices))
    value = payload.get(field, default)
    if value is None:
        raise ApplicationError(f"'{field}' is required.", field=field)
    if value not in allowed:
        raise ApplicationError(f"'{field}' must be one of: {', '.join(allowed)}.", field=field)
    return value


def read_object(payload: dict, field: str, model, *, required: bool = True):
    """The ``model`` row whose id is ``payload[field]``; a 4xx naming the field when unknown."""
    pk = read_int(payload, field, required=required)
    if pk is None:
        return None
    try:
        return model.objects.get(pk=pk)
    except model.DoesNotExist:
        raise ApplicationError(f"No {model._meta.verbose_name} with id {pk}.", field=field, status=404) from None
