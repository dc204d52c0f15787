"""The steps of an OAuth client against the authorization server, shared by the tests (an HTTP client in, JSON out)."""

import base64
import hashlib
import html
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlparse


def pkce() -> tuple[str, str]:
    """A PKCE verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def authorize_query(client_id: str, redirect_uri: str, *, challenge: str | None, scope: str = "", **extra) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "st-1", **extra}
    if challenge:
        params.update(code_challenge=challenge, code_challenge_method="S256")
    if scope:
        params["scope"] = scope
    return urlencode(params)


def hidden_fields(page: str) -> dict[str, str]:
    """The hidden fields of the form in ``page`` (name -> value), the CSRF token among them."""
    fields = {}
    for tag in re.findall(r"<input [^>]*type=\"hidden\"[^>]*>", page):
        name = re.search(r'name="([^"]*)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if name:
            fields[html.unescape(name.group(1))] = html.unescape(value.group(1)) if value else ""
    return fields


def code_from(location: str) -> dict[str, str]:
    """The query of the redirect back to the client: code, state, iss (or error)."""
    return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}
