"""Who may call the MCP server at /mcp: the ASGI middleware in front of the MCP transport.

Two kinds of bearer token are accepted:

- the JSON API's tokens (``INTERNAL_API_TOKENS``): the assistant's own configuration says the room,
  speaker and model location in the headers ``X-Room-Id``, ``X-Speaker-Id``, ``X-Model-Location``;
- OAuth access tokens (connections/oauth.py): the room, speaker and model location are those an admin
  bound the connection to on the consent page; headers cannot change them.

Anything else is a 401 whose ``WWW-Authenticate`` names the RFC 9728 metadata document, from which an
OAuth client (Home Assistant, MCP Inspector) finds the authorization server. A Host outside
ALLOWED_HOSTS is a JSON 400 first, as for the rest of the site.
"""

from dataclasses import dataclass

import anyio
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections
from django.http.request import split_domain_port, validate_host

from connections.models import Access, Connection
from connections.oauth import MCP_PATH, connection_for_token
from justai_memory.api.auth import authorization_valid
from justai_memory.edge.answers import HOST_NOT_ALLOWED, send_json
from justai_memory.edge.errors import RETRY_AFTER_DATABASE, UNAVAILABLE

NO_TOKEN = (
    "This MCP server needs a bearer token: sign in with OAuth (the authorization server is named in "
    "WWW-Authenticate), or send one of the assistant's API tokens."
)
TOKEN_INVALID = "The bearer token is unknown, expired or revoked: sign in again."
CALLER_KEY = "justai.mcp_caller"  # the ASGI scope key the tools read the caller's grant from
ALL_SCOPES = frozenset(Access.ALL.split())  # an API token may do what any connection may


@dataclass(frozen=True)
class Grant:
    """What a request's token allows: its scopes, and the connection when it is an OAuth token."""

    scopes: frozenset[str]
    connection: Connection | None = None


def origin(scope, headers: dict[str, str]) -> str:
    """The origin this request came to: its Host, and the proxy's scheme if trusted (as Django builds URLs)."""
    scheme = scope.get("scheme", "http")
    if settings.SECURE_PROXY_SSL_HEADER:
        header, value = settings.SECURE_PROXY_SSL_HEADER
        if headers.get(header.removeprefix("HTTP_").replace("_", "-").lower()) == value:
            scheme = "https"
    return f"{scheme}://{headers['host']}"


def resource_metadata_url(scope, headers: dict[str, str]) -> str:
    """The RFC 9728 document of /mcp on the origin this request came to."""
    return f"{origin(scope, headers)}/.well-known/oauth-protected-resource{MCP_PATH}"


def _oauth_grant(token: str, resource: str) -> Grant | None:
    close_old_connections()
    try:
        found = connection_for_token(token, resource)
    finally:
        close_old_connections()
    return Grant(scopes=found[1], connection=found[0]) if found else None


async def authorization_grant(authorization: str, resource: str) -> Grant | None:
    """The grant of an ``Authorization`` header value at ``resource`` (this server's MCP URL as the request
    reached it: an OAuth token must have been issued for it), or None when it carries no valid token."""
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    if authorization_valid(authorization):
        return Grant(scopes=ALL_SCOPES)
    return await anyio.to_thread.run_sync(_oauth_grant, token, resource)


def request_grant(request) -> Grant | None:
    """The grant ``McpAuth`` found for this HTTP request (a Starlette request, as the MCP SDK hands it on)."""
    return request.scope.get(CALLER_KEY) if request is not None else None


class McpAuth:
    """ASGI middleware: Host check, then a bearer token (API or OAuth) whose grant the tools read."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # no websockets at /mcp: the server refuses the connection
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        domain, _port = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            await send_json(send, 400, {"error": HOST_NOT_ALLOWED, "field": "Host"})
            return
        authorization = headers.get("authorization", "")
        try:
            grant = await authorization_grant(authorization, f"{origin(scope, headers)}{MCP_PATH}")
        except (OperationalError, InterfaceError):  # the database is down: the tokens cannot be checked
            retry = [(b"retry-after", str(RETRY_AFTER_DATABASE).encode())]
            await send_json(send, 503, {"error": UNAVAILABLE, "field": None}, retry)
            return
        if grant is None:
            challenge = f'Bearer resource_metadata="{resource_metadata_url(scope, headers)}"'
            message = NO_TOKEN
            if authorization:
                challenge += f', error="invalid_token", error_description="{TOKEN_INVALID}"'
                message = TOKEN_INVALID
            await send_json(
                send, 401, {"error": message, "field": "Authorization"}, [(b"www-authenticate", challenge.encode())]
            )
            return
        await self.app({**scope, CALLER_KEY: grant}, receive, send)
