"""gunicorn's configuration for the web server (``gunicorn -c python:justai_memory.serving.gunicorn_conf``).

gunicorn's arbiter keeps WEB_WORKERS uvicorn worker processes (restarting any that dies or hangs
longer than WEB_TIMEOUT) serving the ASGI app ``justai_memory.serving.asgi:application``; values come
from the settings, which read the environment.
"""

import contextlib
import fcntl
import json
import os
import re
import socket
import struct
import termios

import h11

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
# The settings are read here, in the arbiter, and the workers fork from it with them: the pool must be on
# before that (asgi.py's setdefault comes too late under gunicorn). The arbiter itself never connects.
os.environ.setdefault("DATABASE_POOL", "true")

from django.conf import settings
from gunicorn.glogging import Logger as GunicornLogger
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn_worker import UvicornWorker

from justai_memory.edge.answers import refusal
from justai_memory.serving.log_format import Formatter

UNPARSABLE = "The request's head could not be read (malformed, or longer than {limit} bytes)."


class Deadlines(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with deadlines on what a client must do: send each request's head, read each answer.

    - Head: a connection that has not sent a whole head (request line and headers) within WEB_READ_TIMEOUT s of
      connecting, or of its previous answer, is closed: uvicorn itself waits for a head forever (its keep-alive
      timer runs only between requests, and stops at the first byte). The body's deadline is the edge's.
    - Answer: a client that reads nothing of an answer for WEB_SEND_TIMEOUT s (the write buffer stays above its
      low-water mark, and uvicorn's ``send`` waits) is dropped: the connection is reset and its unsent bytes
      discarded, the app's sends return at once and the request ends. An answer sent whole whose bytes still wait
      in the kernel when the next head's deadline passes is dropped the same way: a plain close would keep the
      socket until the client reads them, which may be never.
    """

    head_timer = None
    head_start = b""  # the first bytes of the head being read: its method and path, for a refusal's form
    refused = False  # answered 400 to a head it could not read: the rest of the request is dropped
    send_timer = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._head_deadline_set()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        if self._waiting_for_head() and not self.head_start:
            self.head_start = bytes(data[:256])
        super().data_received(data)
        if not self._waiting_for_head():
            self.head_timer = self._cancelled(self.head_timer)
            self.head_start = b""

    def send_400_response(self, msg: str) -> None:
        """A request uvicorn cannot read (a head over h11's limit among them): a JSON 400 in the edge's form for its
        path (RFC 6749's on the OAuth endpoints), not uvicorn's text/plain."""
        path = re.match(rb"[A-Z]+ (/[^ ?]*)", self.head_start)
        error = UNPARSABLE.format(limit=self.conn._max_incomplete_event_size)
        body = json.dumps(refusal(path.group(1).decode("latin-1") if path else "", error, None)).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        for event in (h11.Response(status_code=400, headers=headers), h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        # Closed at once with unread bytes, the socket would send a reset, which may destroy the answer before the
        # client reads it: only the sending side ends; what still comes is dropped until the head deadline.
        self.refused = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._waiting_for_head() and not self.transport.is_closing():
            self._head_deadline_set()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.send_timer is None:
            self.send_timer = self.loop.call_later(settings.WEB_SEND_TIMEOUT, self._send_deadline_passed)

    def resume_writing(self) -> None:
        super().resume_writing()
        self.send_timer = self._cancelled(self.send_timer)

    def connection_lost(self, exc) -> None:
        self.head_timer = self._cancelled(self.head_timer)
        self.send_timer = self._cancelled(self.send_timer)
        super().connection_lost(exc)

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    @staticmethod
    def _cancelled(timer) -> None:
        if timer is not None:
            timer.cancel()

    def _head_deadline_set(self) -> None:
        self._cancelled(self.head_timer)
        self.head_timer = self.loop.call_later(settings.WEB_READ_TIMEOUT, self._head_deadline_passed)

    def _head_deadline_passed(self) -> None:
        self.head_timer = None
        if self._waiting_for_head() and not self.transport.is_closing():
            if self._unsent():
                self._drop()
            else:
                self.transport.close()

    def _send_deadline_passed(self) -> None:
        self.send_timer = None
        self._drop()

    def _unsent(self) -> int:
        """Bytes of answers not yet taken by the client: in the transport's buffer and the kernel's send queue."""
        sock = self.transport.get_extra_info("socket")
        try:
            queued = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        except (AttributeError, OSError):  # no socket, or no such query on this system
            queued = 0
        return self.transport.get_write_buffer_size() + queued

    def _drop(self) -> None:
        """Reset the connection now, discarding what it has not sent (SO_LINGER 0: no FIN that waits for the client)."""
        sock = self.transport.get_extra_info("socket")
        with contextlib.suppress(AttributeError, OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


class Worker(UvicornWorker):
    """uvicorn worker without uvicorn's access log and without its concurrency limit, with deadlines on heads and answers.

    The access log is written by asgi.py without query strings; uvicorn's would print them. The limit
    (WEB_WORKER_CONNECTIONS) is asgi.py's too, answered in JSON with Retry-After (justai_memory/serving/admission.py);
    uvicorn's would answer text/plain.
    """

    CONFIG_KWARGS = {**UvicornWorker.CONFIG_KWARGS, "access_log": False, "lifespan": "on", "http": Deadlines}


class Logger(GunicornLogger):
    """gunicorn's error log (uvicorn's lines go to its handlers too) with the project's formatter (log_format.py)."""

    def setup(self, cfg):
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(Formatter(self.error_fmt, self.datefmt))


# The supervisor binds the address before it starts anything and hands the socket down (supervisor.web_socket):
# gunicorn never binds, so it never retries a port in use nor takes one later. Alone (a test), it binds itself.
bind = [
    f"fd://{os.environ['JUSTAI_LISTEN_FD']}"
    if "JUSTAI_LISTEN_FD" in os.environ
    else f"{settings.JUSTAI_HOST}:{settings.JUSTAI_PORT}"
]
workers = settings.WEB_WORKERS
worker_class = "justai_memory.serving.gunicorn_conf.Worker"
timeout = settings.WEB_TIMEOUT
graceful_timeout = max(1, settings.STOP_TIMEOUT - 3)  # in-flight requests finish; the supervisor waits longer
keepalive = 5
# X-Forwarded-For and -Proto only from these (gunicorn's default trusts 127.0.0.1, so any local client could
# set the address the access log shows); none unless FORWARDED_ALLOW_IPS names the proxy in front.
forwarded_allow_ips = settings.FORWARDED_ALLOW_IPS
accesslog = None
logger_class = "justai_memory.serving.gunicorn_conf.Logger"
errorlog = "-"
loglevel = settings.LOGGING["root"]["level"].lower()
proc_name = "justai-memory-web"
# The app is imported in the arbiter, and what the workers only read is loaded there once (asgi.preload), shared
# by every worker copy-on-write: the language detector alone is ~250 MB a worker otherwise. A restarted worker
# forks with it loaded.
preload_app = True


def when_ready(server) -> None:
    """After the app is imported in the arbiter, before the workers fork."""
    from justai_memory.serving.asgi import preload

    preload()


control_socket_disable = True  # one per user by default: two services (or tests) would share it
