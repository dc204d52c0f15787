"""What runs the service: the process tree and what each process serves.

- ``supervisor``: ``./scripts/run``'s one process tree (``python -m justai_memory.serving.supervisor``):
  the embedded PostgreSQL (``embedded_db``; ``embedded_postgresql`` is the database backend that starts
  it on first connection), the embedded language model (``embedded_model``), the web server and the
  job cluster; ``children``: each child process and its restart budget.
- ``gunicorn_conf``: gunicorn's configuration; ``asgi``: the Starlette app its uvicorn workers serve
  (``/mcp`` and Django); ``wsgi``: Django's WSGI entry point.
- ``admission``: which requests of a worker run, wait or are told "busy"; ``log_format``: the log lines.

``supervisor``, ``gunicorn_conf``, ``asgi`` and ``wsgi`` sit on top of the wiring (``asgi`` mounts MCP beside
Django); ``children``, ``embedded_db``, ``embedded_model`` and ``log_format`` at its bottom, below ``edge`` (.importlinter).
"""
