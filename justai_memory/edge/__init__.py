"""What the API, MCP and the admin answer alike, below all three: the serving processes sit on top of it.

- ``errors``: the one shape of every error answer (``{"error", "field"}``), its messages, what a client is
  told of a database error ("busy" or "unreachable") and the 500 whose id is logged.
- ``answers``: the answers before or around any endpoint: Django's handler400/404/500, the middleware for a
  database that is down, the refusals the ASGI edge sends itself (``refusal``, ``send_json``).
- ``health``: each component's state and the one verdict on it (``GET /internal/v1/health``, the status page).
"""
