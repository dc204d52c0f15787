"""Bearer-token auth of the internal API: closed (403) without configured tokens, 401 for a missing or wrong token."""

import hmac

from django.conf import settings
from django.http import HttpRequest
from ninja.security.http import HttpBearer

from justai_core.errors import ApplicationError

API_CLOSED = "The internal API is closed: no INTERNAL_API_TOKENS configured."


def token_valid(request: HttpRequest) -> bool:
    """Whether the request carries ``Authorization: Bearer <one of INTERNAL_API_TOKENS>``."""
    return authorization_valid(request.headers.get("Authorization", ""))


def authorization_valid(header: str) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <one of INTERNAL_API_TOKENS>`` (the JSON API and MCP).

    Every configured token is compared, in constant time, so timing says nothing about which one nearly matched.
    """
    scheme, _, token = header.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return False
    matched = False
    for configured in settings.INTERNAL_API_TOKENS:
        matched |= hmac.compare_digest(token.encode(), configured.encode())
    return matched


class BearerToken(HttpBearer):
    """ninja's bearer scheme (for the OpenAPI document) with the checks above; never logs the header."""

    def __call__(self, request: HttpRequest) -> bool | None:
        if not settings.INTERNAL_API_TOKENS:
            raise ApplicationError(API_CLOSED, status=403)
        return token_valid(request) or None

    def authenticate(self, request: HttpRequest, token: str) -> bool | None:  # required by HttpBearer; unused
        return token_valid(request) or None
