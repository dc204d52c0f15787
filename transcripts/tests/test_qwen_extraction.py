"""Done-when test of extraction that is right: one long German conversation through the extraction job against
llama.cpp (xllamacpp) serving the Qwen2.5-Coder-1.5B file, as ``AI_MEMORY_PROVIDER=embedded`` serves it.

The file is built offline with ../shared/tools/qwen-1.5b-gguf.sh when it is missing (SHA-256 checked). The
server takes requests with the installation's key only. Asserted: the corrected value (not the old one),
the resolved date, the private item private to whom asked, and nothing of the small talk or the hearsay.
"""

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from justai_core.ai_router import EMBEDDED_PORTS, embedded_api_key
from justai_memory.serving.embedded_model import FETCH_NAME, free_loopback_port
from memories.models import Memory, Scope
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, ExtractionStatus
from transcripts.services.extraction.run import conversation_extract
from transcripts.tests.factories import ConversationFactory, TurnFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT.parent / "shared" / "tools" / "qwen-1.5b-gguf.sh"
MODELS = Path.home() / ".cache" / "justai-models"
SATURDAY = datetime(2026, 3, 14, 8, 0, tzinfo=UTC)
TURNS = [
    ("Anna", "Guten Morgen! Was für ein schöner sonniger Tag heute."),
    ("A", "Guten Morgen, Anna. Ja, bis 15 Grad."),
    ("Anna", "Merk dir bitte: der Code für die Garage ist 4711."),
    ("A", "Notiert: 4711."),
    ("Marco", "Nein, den haben wir geändert, der Code für die Garage ist jetzt 4712."),
    ("A", "Danke, ich merke mir 4712."),
    ("Anna", "Marco hat nächsten Freitag um 10 Uhr einen Zahnarzttermin."),
    ("A", "Soll ich daran erinnern?"),
    ("Marco", "Ja, bitte. Das Geschenk für Anna liegt im Keller hinter den Skiern."),
    ("Marco", "Das bleibt bitte nur für mich."),
    ("A", "Verstanden, das bleibt bei dir."),
    ("Anna", "Lisa hat mir erzählt, dass ihr Nachbar schwer krank ist."),
    ("A", "Das ist seine Privatsache."),
]


def qwen_file() -> Path:
    path = MODELS / FETCH_NAME
    if not path.exists():
        subprocess.run(["bash", str(BUILD), str(MODELS)], check=True, timeout=3600)
    return path


@pytest.fixture
def qwen_server(settings):
    """The Qwen file served as the embedded provider serves it, on a free loopback port; its base URL."""
    port = free_loopback_port(EMBEDDED_PORTS[0])
    code = (
        "import os; from pathlib import Path; from justai_memory.serving.embedded_model import serve; "
        f"serve(path=Path({str(qwen_file())!r}), port={port}, threads=2, context=8192, max_tokens=4096, "
        "api_key=os.environ['TEST_MODEL_KEY'])"
    )
    env = {**os.environ, "TEST_MODEL_KEY": embedded_api_key()}
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert process.poll() is None, "the model server exited"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                time.sleep(1)
        base_url = f"http://127.0.0.1:{port}/v1"
        settings.AI_ROLES = {"memory": {"provider": "embedded", "base_url": base_url}}
        yield base_url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def test_the_server_refuses_a_request_without_the_installations_key(qwen_server):
    request = urllib.request.Request(f"{qwen_server}/models", headers={"Authorization": "Bearer someone-else"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401


def test_a_long_german_conversation_keeps_the_corrected_value_the_date_and_the_private_item(qwen_server):
    people = {name: PersonFactory(name=name) for name in ("Anna", "Marco")}
    conversation = ConversationFactory(speaker=people["Anna"], room=RoomFactory(name="Küche"), started_at=SATURDAY)
    for who, text in TURNS:
        if who == "A":
            TurnFactory(conversation=conversation, role="assistant", text=text)
        else:
            TurnFactory(conversation=conversation, role="user", speaker=people[who], text=text)
    Conversation.objects.filter(pk=conversation.pk).update(
        ended_at=SATURDAY + timedelta(minutes=20), extraction_status=ExtractionStatus.QUEUED
    )
    conversation = conversation_extract(conversation_id=conversation.pk)
    assert conversation.extraction_status == ExtractionStatus.DONE, conversation.extraction_error
    memories = list(Memory.objects.all())
    stats = conversation.extraction_stats
    texts = (
        " | ".join(memory.content for memory in memories) + f" (extracted {stats['extracted']}: {stats['rejected']})"
    )
    assert any("4712" in m.content for m in memories) and "4711" not in texts, texts
    assert any("2026-03-20" in m.content for m in memories), texts
    # The private item, where stored, is Marco's alone. Qwen 1.5B leaves it out and code makes it from his turn
    # (rules.private_left_out), unless one of the model's items cites that turn with other content: then nothing
    # holds the gift (1 run in 3). That code's item is kept is tested with the fake model in test_extraction_rules.py.
    gift = [m for m in memories if "Geschenk" in m.content or "Skiern" in m.content]
    assert all(m.scope == Scope.PRIVATE and m.owner_id == people["Marco"].pk for m in gift), texts
    for never in ("sonnig", "15 Grad", "krank", "Nachbar"):
        assert never not in texts, texts
