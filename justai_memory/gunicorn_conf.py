"""gunicorn's configuration for the web server (``gunicorn -c python:justai_memory.gunicorn_conf``).

gunicorn's arbiter keeps WEB_WORKERS uvicorn worker processes (restarting any that dies or hangs
longer than WEB_TIMEOUT) serving the ASGI app ``justai_memory.asgi:application``; values come
from the settings, which read the environment.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
# The settings are read here, in the arbiter, and the workers fork from it with them: the pool must be on
# before that (asgi.py's setdefault comes too late under gunicorn). The arbiter itself never connects.
os.environ.setdefault("DATABASE_POOL", "true")

from django.conf import settings
from gunicorn.glogging import Logger as GunicornLogger
from uvicorn_worker import UvicornWorker

from justai_memory.log_format import Formatter


class Worker(UvicornWorker):
    """uvicorn worker without uvicorn's access log and without its concurrency limit.

    The access log is written by asgi.py without query strings; uvicorn's would print them. The limit
    (WEB_WORKER_CONNECTIONS) is asgi.py's too, answered in JSON with Retry-After (justai_memory/edge.py);
    uvicorn's would answer text/plain.
    """

    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "access_log": False, "lifespan": "on"}


class Logger(GunicornLogger):
    """gunicorn's error log (uvicorn's lines go to its handlers too) with the project's formatter (log_format.py)."""

    def setup(self, cfg):
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(Formatter(self.error_fmt, self.datefmt))


bind = [f"{settings.JUSTAI_HOST}:{settings.JUSTAI_PORT}"]
workers = settings.WEB_WORKERS
worker_class = "justai_memory.gunicorn_conf.Worker"
timeout = settings.WEB_TIMEOUT
graceful_timeout = max(1, settings.STOP_TIMEOUT - 3)  # in-flight requests finish; the supervisor waits longer
keepalive = 5
accesslog = None
logger_class = "justai_memory.gunicorn_conf.Logger"
errorlog = "-"
loglevel = settings.LOGGING["root"]["level"].lower()
proc_name = "justai-memory-web"
control_socket_disable = True  # one per user by default: two services (or tests) would share it
