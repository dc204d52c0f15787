"""Where a client may be sent back to, and what a token may be for: the two URI rules of the OAuth server.

- A redirect URI (the MCP authorization spec, RFC 6749 3.1.2, RFC 8252 8.3): https, or http on a loopback host
  only (127.0.0.0/8, [::1], localhost); no user name or password, no fragment. The same rule at registration
  (RFC 7591), its update (RFC 7592) and the authorization endpoint. A client an admin registered may also be
  sent back over http on the LAN (Home Assistant without *My Home Assistant*: the admin named the address).
- A resource (RFC 8707): compared by scheme, host, port (the scheme's default when left out), path (dot
  segments and a trailing slash removed) and query; an absolute http(s) URI of a host, without fragment.
"""

import ipaddress
import posixpath
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
NOT_A_URI = "is no absolute http(s) URI of a host."
NO_USERINFO = "must not hold a user name or password."
NO_FRAGMENT = "must not hold a fragment."
HTTPS_ONLY = "must use https (http only on a loopback host: 127.0.0.1, [::1] or localhost)."


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (RFC 8252 7.3, and the name the MCP specification allows)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_problem(uri: str, *, admin_registered: bool = False) -> str | None:
    """Why ``uri`` may not be a redirect URI (a phrase that follows its name), or None when it may.

    ``admin_registered``: the client was registered by an admin, who may name an http address on the LAN."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises on a port that is no number)
    except (TypeError, ValueError):
        return NOT_A_URI
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return NOT_A_URI
    if "@" in parts.netloc:
        return NO_USERINFO
    if "#" in uri:
        return NO_FRAGMENT
    if parts.scheme == "http" and not admin_registered and not is_loopback(parts.hostname):
        return HTTPS_ONLY
    return None


def resource_key(uri) -> tuple | None:
    """A resource URI as RFC 8707 compares it: scheme, host, port, path and query; None for what is no absolute
    http(s) URI of a host, or holds a user name or a fragment."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except (TypeError, ValueError):
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc or "#" in uri:
        return None
    path = posixpath.normpath(parts.path or "/")
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme], path, parts.query
