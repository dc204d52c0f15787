"""Which HTTP requests of a worker run, wait for their turn, or are refused, before Django or MCP sees them.

- **Slow clients**: a request's body is read whole before it counts (``Admission``), within
  ``WEB_READ_TIMEOUT`` s (else a JSON 408) and ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (else a JSON 413);
  its head has the same time (``Deadlines``, the uvicorn worker's protocol in gunicorn_conf.py). So a
  slow upload costs a socket and its bytes so far, never a place among the requests being served. A request
  counts until its answer starts; a client that reads nothing of it for ``WEB_SEND_TIMEOUT`` s is reset.
- **Overload**: ``Admission`` runs at most ``DATABASE_POOL_MAX_SIZE`` requests at once in a worker (one
  per pooled connection); the others wait for their turn up to ``WEB_QUEUE_TIMEOUT`` s, at most
  ``WEB_WORKER_CONNECTIONS`` admitted at once; past either a JSON 503 "busy" with ``Retry-After``
  (uvicorn's own ``limit_concurrency`` would answer text/plain, without Retry-After). Plain ASGI, no Django.
  A pool that still times out (``PoolTimeout``) is "busy" too, never "the database is unreachable".
"""

import asyncio
import collections

from justai_memory.edge.answers import refusal, send_busy, send_json
from justai_memory.edge.errors import BUSY_WAITED, body_too_large

BUSY = "The server is busy: more than {limit} requests at once in this worker; try again shortly."
BODY_TOO_SLOW = "The request body did not arrive within {seconds} s."


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


async def body_read(receive, *, max_bytes: int) -> bytes:
    """The whole body of an HTTP request from ASGI ``receive``; BodyTooLarge past ``max_bytes``, ClientGone on a disconnect."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def body_replayed(body: bytes, receive):
    """An ASGI ``receive`` that gives ``body`` whole once, then what the client sends (its disconnect)."""
    given = False

    async def replay():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class Admission:
    """Which HTTP requests of this worker process run, wait for their turn, or are told "busy" (a JSON 503, Retry-After).

    - A request counts once its body has arrived: the body is read first, within ``read_timeout`` s and
      ``max_body`` bytes (a JSON 408 or 413 otherwise), so slow or stalled uploads, however many, hold no place.
    - At most ``running`` requests run at once: one per connection of the worker's database pool (a request
      runs Django's code on a thread of its own and holds one connection), so none waits for the pool.
    - The others wait for their turn, first come first served, at most ``wait`` s; then "busy". At most
      ``limit`` requests are admitted at once, running or waiting; the next is told "busy" at once.
    - A request counts until its answer starts: a client that reads its answer slowly holds no place (the send
      deadline, gunicorn_conf.Deadlines, ends it). Ungated requests (static files: no database) wait for no turn.

    One event loop per worker: plain counters and futures, no locks.
    """

    def __init__(self, *, running: int, limit: int, wait: float, read_timeout: float = 10.0, max_body: int = 2_621_440):
        self.running_max, self.limit, self.wait = max(1, min(running, limit)), limit, wait
        self.read_timeout, self.max_body = read_timeout, max_body
        self.admitted = 0  # running or waiting
        self.running = 0
        self.waiting: collections.deque[asyncio.Future] = collections.deque()

    async def serve(self, app, scope, receive, send, *, gated: bool = True) -> None:
        """Read the body, then run ``app`` in its turn; ``gated=False`` (static files, no database) needs no turn."""
        try:
            async with asyncio.timeout(self.read_timeout):
                body = await body_read(receive, max_bytes=self.max_body)
        except TimeoutError:
            error = BODY_TOO_SLOW.format(seconds=f"{self.read_timeout:g}")
            await send_json(send, 408, refusal(scope.get("path", ""), error, "body"), [(b"connection", b"close")])
            return
        except BodyTooLarge:
            error = body_too_large(self.max_body)
            await send_json(send, 413, refusal(scope.get("path", ""), error, "body"), [(b"connection", b"close")])
            return
        except ClientGone:
            return
        if self.admitted >= self.limit:
            await send_busy(send, BUSY.format(limit=self.limit), scope.get("path", ""))
            return
        self.admitted += 1
        running = answered = False

        async def send_answering(message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                self._leave(running=running)
            await send(message)

        try:
            if gated:
                running = await self._turn()
                if not running:
                    await send_busy(send, BUSY_WAITED.format(seconds=f"{self.wait:g}"), scope.get("path", ""))
                    return
            await app(scope, body_replayed(body, receive), send_answering)
        finally:
            if not answered:
                self._leave(running=running)

    def _leave(self, *, running: bool) -> None:
        """A request's answer started (or it ended): it counts no more, and its place serves the next.

        The answer holds no database connection (``connections_returned``); its body goes out at the client's pace,
        under the send deadline (gunicorn_conf.Deadlines), and a slow reader makes nobody wait.
        """
        self.admitted -= 1
        if running:
            self._release()

    async def _turn(self) -> bool:
        """Whether this request may run: at once, or once one that runs hands over its place within ``wait`` s."""
        if self.running < self.running_max and not self.waiting:
            self.running += 1
            return True
        turn = asyncio.get_running_loop().create_future()
        self.waiting.append(turn)
        try:
            async with asyncio.timeout(self.wait):
                await turn
            return True
        except TimeoutError:
            return turn.done() and not turn.cancelled()  # handed its place just as the wait ended: it runs
        except BaseException:  # the request was cancelled (the server stops): a place handed to it goes on
            if turn.done() and not turn.cancelled():
                self._release()
            raise
        finally:
            if turn in self.waiting:
                self.waiting.remove(turn)

    def _release(self) -> None:
        """A request ended: its place goes to the first that still waits, else it is free."""
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.running -= 1
