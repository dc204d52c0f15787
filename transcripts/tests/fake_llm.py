"""A local fake OpenAI-compatible chat server for tests: 127.0.0.1, an ephemeral port, a thread.

The real ``openai`` client talks to it over HTTP. Answers are scripted (``reply``, ``reply_streamed``,
``fail``, ``reply_with``) and served in order; when the script is empty the ``default`` answer is
served. A request with ``"stream": true`` gets its answer as server-sent events, in pieces (a
scripted pace, or a stall part-way).
Every request is recorded (path, headers, JSON body) for assertions.
"""

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STREAM_CHUNK_CHARS = 16  # a request with "stream": true gets its answer in pieces of this many characters


def extraction_answer(*, facts=(), preferences=(), summary: str = "") -> str:
    """The JSON text of an extraction answer; facts/preferences are strings or item dicts (stated unless ``inferred``)."""

    def item(value):
        if isinstance(value, dict):
            return {
                "inferred": False,
                "subject": "",
                "predicate": "",
                "scope": "shared",
                "confidence": 0.9,
                "importance": 0.5,
                **value,
            }
        return item({"content": value})

    return json.dumps(
        {
            "facts": [item(f) for f in facts],
            "preferences": [item(p) for p in preferences],
            "summary": {"content": summary, "scope": "shared", "importance": 0.3},
        },
        ensure_ascii=False,
    )


@dataclass
class Recorded:
    path: str
    headers: dict  # names in lower case
    body: dict

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def prompt(self) -> str:
        """All message contents joined (system rules and transcript)."""
        return "\n".join(m.get("content", "") for m in self.messages)


@dataclass
class _Answer:
    status: int = 200
    content: str | None = None
    body: str | None = None
    delay: float = 0.0
    responder: Callable[[Recorded], str] | None = None
    chunk_chars: int = 0  # a streamed answer's piece size (0: the default, STREAM_CHUNK_CHARS)
    chunk_delay: float = 0.0  # seconds before each streamed piece
    stall_after: int | None = None  # a streamed answer stops sending after this many pieces (then hangs)
    stall: float = 0.0  # for this long


@dataclass
class FakeLLM:
    """Start with ``start()`` (or use as a context manager); ``base_url`` is what the router needs."""

    default: str = field(default_factory=extraction_answer)
    model: str = "fake-model"  # the one model GET /models lists
    port: int = 0  # 0: an ephemeral one
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self):
        self._script: deque[_Answer] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # --- scripting -------------------------------------------------------------------------
    def reply(self, content: str, *, delay: float = 0.0) -> "FakeLLM":
        """Queue one successful answer whose message content is ``content``."""
        self._script.append(_Answer(content=content, delay=delay))
        return self

    def reply_streamed(
        self,
        content: str,
        *,
        chunk_chars: int = STREAM_CHUNK_CHARS,
        chunk_delay: float = 0.0,
        stall_after: int | None = None,
        stall: float = 0.0,
    ) -> "FakeLLM":
        """Queue one answer for a streamed request: ``chunk_chars`` a piece, ``chunk_delay`` seconds before each;
        after ``stall_after`` pieces nothing more comes for ``stall`` seconds (a stalled model)."""
        self._script.append(
            _Answer(
                content=content, chunk_chars=chunk_chars, chunk_delay=chunk_delay, stall_after=stall_after, stall=stall
            )
        )
        return self

    def reply_with(self, responder: Callable[[Recorded], str]) -> "FakeLLM":
        """Queue one answer computed from the request."""
        self._script.append(_Answer(responder=responder))
        return self

    def fail(self, status: int = 500, body: str = '{"error": {"message": "scripted failure"}}') -> "FakeLLM":
        """Queue one HTTP error."""
        self._script.append(_Answer(status=status, body=body))
        return self

    # --- server ----------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeLLM":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # keep test output quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                recorded = Recorded(path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body=body)
                with fake._lock:
                    fake.requests.append(recorded)
                    answer = fake._script.popleft() if fake._script else _Answer(content=fake.default)
                if answer.delay:
                    time.sleep(answer.delay)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, json.dumps({"error": {"message": "not found"}}))
                if answer.status != 200:
                    # A tiny Retry-After keeps the SDK's retry backoff short in tests.
                    return self._send(answer.status, answer.body or "{}", {"retry-after-ms": "5"})
                content = answer.responder(recorded) if answer.responder else answer.content
                if body.get("stream"):
                    return self._stream(answer, content, model=body.get("model", "fake"))
                return self._send(200, json.dumps(fake.completion(content, model=body.get("model", "fake"))))

            def _stream(self, answer: _Answer, content: str, *, model: str):
                """Server-sent events as OpenAI streams them: one chunk a piece, then a finish chunk and [DONE]."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                size = answer.chunk_chars or STREAM_CHUNK_CHARS
                pieces = [content[i : i + size] for i in range(0, len(content), size)]
                try:
                    for number, piece in enumerate(pieces):
                        if answer.stall_after is not None and number == answer.stall_after:
                            time.sleep(answer.stall)
                            return
                        if answer.chunk_delay:
                            time.sleep(answer.chunk_delay)
                        self._event(fake.chunk(piece, model=model))
                    self._event(fake.chunk(None, model=model, finish_reason="stop"))
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading (a stall it timed out, or an answer it cut)

            def _event(self, data: dict):
                self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
                self.wfile.flush()

            def do_GET(self):
                """GET {base_url}/models lists the one fake model (the health check's probe)."""
                recorded = Recorded(path=self.path, headers={k.lower(): v for k, v in self.headers.items()}, body={})
                with fake._lock:
                    fake.requests.append(recorded)
                if not self.path.rstrip("/").endswith("/models"):
                    return self._send(404, json.dumps({"error": {"message": "not found"}}))
                models = [{"id": fake.model, "object": "model", "created": 0, "owned_by": "fake"}]
                return self._send(200, json.dumps({"object": "list", "data": models}))

            def _send(self, status: int, text: str, headers: dict | None = None):
                data = text.encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeLLM":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @staticmethod
    def chunk(content: str | None, *, model: str, finish_reason: str | None = None) -> dict:
        """One chat.completion.chunk of a streamed answer."""
        delta = {"role": "assistant", "content": content} if content is not None else {}
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        }

    @staticmethod
    def completion(content: str, *, model: str) -> dict:
        """A minimal chat.completion object as OpenAI returns it."""
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
