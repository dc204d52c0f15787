"""What every OAuth endpoint answers, whatever the method, size or form of the request; the token endpoint itself.

- Errors are RFC 6749 5.2 JSON (``error`` + ``error_description``, ``Content-Type: application/json``) at the
  token, revocation and registration endpoints always, and at the authorization endpoint for programs (a
  browser gets a page): a method the endpoint does not take is a 405 with ``Allow``; too many form fields, a
  NUL character or an overlong parameter ``invalid_request``; a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` a 413
  (the server's edge answers it first, in the same form: justai_memory/edge/answers.py); an error oauthlib
  answered without a description or a content type gets them.
- The token endpoint takes the grant types ``authorization_code`` and ``refresh_token`` only (``MemoryServer``):
  any other, the device code grant among them, is ``unsupported_grant_type``. Each token request is one
  transaction, in which ``connections.oauth.MemoryValidator`` locks the code or refresh token it uses: two
  requests with one code or one refresh token run one after the other.
"""

import base64
import binascii
import functools
import json
from urllib.parse import unquote_plus

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.db import transaction
from django.http import JsonResponse
from oauth2_provider import views as oauth_views
from oauthlib.oauth2 import Server

GRANT_TYPES = ("authorization_code", "refresh_token")
MAX_PARAMETER_CHARS = 2048  # any one parameter (a state, a redirect URI, a code, a token, a secret)
# What each error of RFC 6749 means here, for the answers that came without a description (oauthlib leaves
# most without one; Home Assistant logs a missing one as "unknown error").
ERROR_DESCRIPTIONS = {
    "invalid_request": "The request lacks a parameter, repeats one, or holds one that is not allowed.",
    "invalid_client": "The client is unknown, or its authentication failed.",
    "invalid_grant": (
        "The code or refresh token is unknown, expired, used or revoked, or was issued to another client; or "
        "the PKCE code_verifier or the redirect_uri does not match the authorization request."
    ),
    "unauthorized_client": "This client may not use this grant type.",
    "unsupported_grant_type": "This server takes the grant types authorization_code and refresh_token only.",
    "unsupported_response_type": "This server takes the response type code only.",
    "invalid_scope": "The scope is unknown; this server has memory:read and memory:write.",
    "unsupported_token_type": "This server revokes access and refresh tokens only.",
    "access_denied": "The request was denied.",
}
METHOD_NOT_ALLOWED = "This endpoint takes {allowed} requests only, not {method}."
TOO_MANY_FIELDS = "The request holds more than {limit} parameters."
BODY_TOO_LARGE = "The request body is larger than {limit} bytes."
REFUSED = "The request was refused ({status})."


def oauth_error(error: str, description: str, *, status: int = 400) -> JsonResponse:
    """An RFC 6749 5.2 error answer."""
    return JsonResponse({"error": error, "error_description": description}, status=status)


def body_too_large() -> JsonResponse:
    return oauth_error("invalid_request", BODY_TOO_LARGE.format(limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE), status=413)


class MemoryServer(Server):
    """oauthlib's server with the token endpoint's grant types cut to what the consent page leads to."""

    def __init__(self, request_validator, *args, **kwargs):
        super().__init__(request_validator, *args, **kwargs)
        self._grant_types = {name: grant for name, grant in self._grant_types.items() if name in GRANT_TYPES}


class TokenView(oauth_views.TokenView):
    """django-oauth-toolkit's token endpoint, each request one transaction (the validator's locks last until it
    ends), every grant type through oauthlib (the toolkit's own branch for the device code grant is not taken)."""

    def post(self, request, *args, **kwargs):
        with transaction.atomic():
            return self.authorization_flow_token_response(request)


def _basic_credentials(request) -> str:
    """The decoded credentials of an ``Authorization: Basic`` header ('' for any other header or bad base64), also
    form-decoded as RFC 6749 2.3.1 has them (``%00`` is a NUL there too)."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8", "replace")
    except (ValueError, binascii.Error):
        return ""
    return f"{decoded} {unquote_plus(decoded)}"


def _input_problem(request) -> str | None:
    """What makes the request's parameters unfit for any OAuth endpoint, or None. Reads the body (Django raises
    ``RequestDataTooBig`` or ``TooManyFieldsSent`` here, not in the view)."""
    if request.method in ("POST", "PUT"):
        request.body  # noqa: B018 (read once, within DATA_UPLOAD_MAX_MEMORY_SIZE)
    items = [*request.GET.lists(), *(request.POST.lists() if request.method == "POST" else [])]
    for name, values in items:
        if any("\x00" in value for value in values) or "\x00" in name:
            return f"The parameter {name!r} holds a NUL character."
        if any(len(value) > MAX_PARAMETER_CHARS for value in values):
            return f"The parameter {name!r} is longer than {MAX_PARAMETER_CHARS} characters."
    if "\x00" in _basic_credentials(request):
        return "The client credentials of the Authorization header hold a NUL character."
    return None


def oauth_endpoint(view, *, pages_for_browsers: bool = False):
    """An OAuth endpoint (authorize, token, revoke, register): bad input is ``invalid_request`` JSON before the
    view runs, and every error it answers is RFC 6749 JSON with an ``error_description`` (``pages_for_browsers``:
    a request that accepts ``text/html`` may get the view's own page instead, as the consent page's errors are).

    Refused first: a parameter or Basic credentials holding a NUL character (PostgreSQL cannot store one, and
    no identifier, code or token contains one), a parameter longer than ``MAX_PARAMETER_CHARS`` (a ``state``
    comes back in the redirect, whatever its length), more than ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` parameters."""

    @functools.wraps(view)  # keeps the view's csrf_exempt and login_not_required marks
    def wrapped(request, *args, **kwargs):
        try:
            problem = _input_problem(request)
        except TooManyFieldsSent:
            problem = TOO_MANY_FIELDS.format(limit=settings.DATA_UPLOAD_MAX_NUMBER_FIELDS)
        except RequestDataTooBig:
            return body_too_large()
        if problem:
            return oauth_error("invalid_request", problem)
        response = view(request, *args, **kwargs)
        if pages_for_browsers and "text/html" in request.headers.get("Accept", ""):
            return response
        return _as_oauth_json(response, request.method)

    return wrapped


def _as_oauth_json(response, method: str):
    """The view's answer; an error in RFC 6749 JSON: its own JSON error with a content type and a description, or
    ``invalid_request`` for what it answered otherwise (Django's empty 405, keeping its ``Allow``)."""
    if response.status_code < 400:
        return response
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        if response.status_code == 405:
            allowed = response.get("Allow", "")
            body = {
                "error": "invalid_request",
                "error_description": METHOD_NOT_ALLOWED.format(allowed=allowed, method=method),
            }
        else:
            body = {"error": "invalid_request", "error_description": REFUSED.format(status=response.status_code)}
    if not body.get("error_description"):
        body["error_description"] = ERROR_DESCRIPTIONS.get(body["error"], "The request was refused.")
    answer = JsonResponse(body, status=response.status_code)
    for header, value in response.items():
        if header.lower() not in ("content-type", "content-length"):
            answer[header] = value
    return answer
