"""What runs the service: the process tree and what each process serves.

- ``supervisor``: ``./scripts/run``'s one process tree (``python -m justai_memory.serving.supervisor``):
  the embedded PostgreSQL (``embedded_db``; ``embedded_postgresql`` is the database backend that starts
  it on first connection), the embedded language model (``embedded_model``), the web server and the
  job cluster.
- ``gunicorn_conf``: gunicorn's configuration; ``asgi``: the Starlette app its uvicorn workers serve
  (``/mcp`` and Django); ``wsgi``: Django's WSGI entry point.
- ``edge``: the answers before or around any endpoint (admission, JSON errors); ``log_format``: the log
  lines; ``health``: each component's state for ``GET /internal/v1/health`` and the status page.
"""
