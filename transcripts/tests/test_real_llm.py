"""Extraction against a real model: llama.cpp (xllamacpp) serving SmolLM2-135M-Instruct over the OpenAI-compatible API.

The fake LLM accepts any request; a real local server converts the structured-output schema into a
grammar and rejects what it cannot convert. This test sends the generated schema through the
``llamacpp`` preset to a real server on loopback and runs the extraction to its end. It asserts
that the server accepted the request, that the answer parses and that the conversation is ``done``,
never what a 135M model extracts.
"""

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, Turn
from transcripts.schemas import EXTRACTION_SCHEMA, extraction_parse
from transcripts.selectors import EXTRACT_JOB
from transcripts.tests.llamacpp_server import LlamaCppServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

# Greedy decoding (the extraction asks for temperature 0) of the 135M model lists the same item again
# and again; the service closes the stream at the first repeat and keeps the items before it, so no
# steering is needed any more (a bias against the tokens that open an object once made the lists
# close empty). The proxy passes the request unchanged.
STEERING: dict = {}
STARTED = datetime(2025, 3, 14, 9, 30, tzinfo=UTC)  # a fixed prompt: greedy decoding is then deterministic


def answer_of(data: bytes, *, streamed: bool) -> dict:
    """The response as a chat.completion: a streamed one (server-sent events) with its pieces joined."""
    if not streamed or b"data:" not in data:
        return json.loads(data or b"{}")
    pieces = []
    for line in data.decode().splitlines():
        if line.strip().startswith("data: {"):
            for choice in json.loads(line.strip().removeprefix("data: ")).get("choices", []):
                pieces.append((choice.get("delta") or {}).get("content") or "")
    return {"choices": [{"message": {"content": "".join(pieces)}}]}


@dataclass
class Exchange:
    path: str
    request: dict
    status: int
    response: dict


@dataclass
class SteeringProxy:
    """A loopback proxy to the real server that records each exchange and adds STEERING to chat requests."""

    upstream: str  # the real server's address, without /v1
    exchanges: list[Exchange] = field(default_factory=list)

    def __enter__(self) -> "SteeringProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                sent = {**body, **STEERING} if self.path.endswith("/chat/completions") else body
                request = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=json.dumps(sent).encode(),
                    headers={"Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(request, timeout=600) as response:
                        if body.get("stream"):  # passed on as it comes: the client times the pace
                            data = self._relay(response)
                            status = response.status
                        else:
                            status, data = response.status, response.read()
                            self._send(status, data)
                except urllib.error.HTTPError as error:
                    status, data = error.code, error.read()
                    self._send(status, data)
                proxy.exchanges.append(Exchange(self.path, body, status, answer_of(data, streamed=body.get("stream"))))

            def _send(self, status: int, data: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _relay(self, response) -> bytes:
                self.send_response(response.status)
                self.send_header("Content-Type", response.headers.get("Content-Type", "text/event-stream"))
                self.end_headers()
                data = b""
                for line in response:
                    data += line
                    try:
                        self.wfile.write(line)
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        break  # the client closed the stream (its answer stopped at a repeat)
                return data

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"


@pytest.fixture
def llamacpp(tmp_path):
    with LlamaCppServer(log_path=tmp_path / "llamacpp.log") as server, SteeringProxy(server.address) as proxy:
        yield server, proxy


def test_extraction_through_a_real_llamacpp_server(
    api, settings, llamacpp, run_jobs, django_capture_on_commit_callbacks
):
    server, proxy = llamacpp
    # What AI_MEMORY_PROVIDER=llamacpp and AI_MEMORY_BASE_URL give: the preset fills in the rest.
    settings.AI_ROLES = {"memory": {"provider": "llamacpp", "base_url": proxy.base_url}}
    anna = PersonFactory(name="Anna", preferred_language="en")
    room = RoomFactory(name="Kitchen")
    conversation_id = api.post(
        "/internal/v1/conversations",
        {"room_id": room.pk, "speaker_id": anna.pk, "language": "en", "model_location": "local"},
    ).json()["id"]
    api.post(
        f"/internal/v1/conversations/{conversation_id}/turns",
        {
            "turns": [
                {"role": "user", "text": "Tom's birthday is on 2 May."},
                {"role": "assistant", "text": "Noted."},
            ]
        },
    )
    Conversation.objects.filter(pk=conversation_id).update(started_at=STARTED)
    for minute, turn in enumerate(Turn.objects.filter(conversation_id=conversation_id).order_by("pk")):
        Turn.objects.filter(pk=turn.pk).update(created_at=STARTED + timedelta(minutes=minute))
    with django_capture_on_commit_callbacks(execute=True):
        api.post(f"/internal/v1/conversations/{conversation_id}/end")

    outcome = run_jobs()
    conversation = Conversation.objects.get(pk=conversation_id)
    assert outcome == [(EXTRACT_JOB, (conversation_id,), "done")], (conversation.extraction_error, server.log()[-2000:])

    deadline = time.monotonic() + 60  # the proxy notices the closed stream at the next token it relays
    while not proxy.exchanges and time.monotonic() < deadline:
        time.sleep(0.2)
    [exchange] = proxy.exchanges
    assert (exchange.path, exchange.status) == ("/v1/chat/completions", 200)
    assert exchange.request["model"] == "default"  # the llamacpp preset's
    assert exchange.request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "memory_extraction", "schema": EXTRACTION_SCHEMA},
    }
    answer = exchange.response["choices"][0]["message"]["content"]
    extraction_parse(text=answer)  # raises MalformedAnswer when the top level does not hold
    assert (conversation.extraction_status, conversation.extraction_attempts, conversation.extraction_error) == (
        "done",
        1,
        "",
    )
    assert (conversation.extraction_stats["model"], conversation.extraction_stats["location"]) == ("default", "local")
