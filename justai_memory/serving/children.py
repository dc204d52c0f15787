"""The supervisor's children: one process each, restarted after a backoff within a budget (serving/supervisor.py).

``Restarts`` is the policy: a child that dies is restarted after 1 s, doubling up to 30 s, back to 1 s once it ran
for a minute; more than ``limit`` restarts within ``window`` s is ``GiveUp``. ``Child`` runs one process in a session
of its own that gets SIGTERM when the supervisor dies; ``ModelServer`` is the embedded model, probed while it runs
and never fatal.
"""

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
RESTART_LIMIT, RESTART_WINDOW = 10, 600.0  # defaults of the settings of the same names
QUICK_SECONDS = 60.0  # a child that ran this long starts its backoff over
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
TICK = 0.25
MODEL_PROBE_SECONDS, MODEL_PROBE_TIMEOUT, MODEL_PROBE_FAILURES = 10.0, 5.0, 3

logger = logging.getLogger("justai_memory.serving.supervisor")  # the supervisor's lines, whichever module writes them


class GiveUp(Exception):
    """A child keeps failing: stop everything and exit non-zero."""


PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


def prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(option, value)


def die_with_parent() -> None:
    """In a child before exec: SIGTERM when the supervisor dies (Linux), a session of its own (no terminal signals)."""
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Restarts:
    """Backoff and give-up bookkeeping for one restartable thing: at most ``limit`` restarts per ``window`` s."""

    def __init__(self, name: str, *, limit: int = RESTART_LIMIT, window: float = RESTART_WINDOW):
        self.name, self.limit, self.window = name, limit, window
        self.failures: list[float] = []  # monotonic times of the failures within the window
        self.backoff = BACKOFF_FIRST
        self.started_at = 0.0
        self.restart_at: float | None = None

    def started(self) -> None:
        self.started_at = time.monotonic()
        self.restart_at = None

    def failed(self, reason: str) -> None:
        now = time.monotonic()
        ran = now - self.started_at
        if ran >= QUICK_SECONDS:
            self.backoff = BACKOFF_FIRST
        self.failures = [*(t for t in self.failures if t > now - self.window), now]
        if len(self.failures) > self.limit:
            raise GiveUp(
                f"{self.name} {reason}; it failed {len(self.failures)} times within {self.window:.0f} s, giving up"
            )
        logger.error("%s %s after %.0f s; restarting in %.0f s", self.name, reason, ran, self.backoff)
        self.restart_at = now + self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)

    def due(self) -> bool:
        return self.restart_at is not None and time.monotonic() >= self.restart_at


class Child:
    """One supervised child process."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], budget: dict, pass_fds: tuple[int, ...] = ()):
        self.name, self.argv, self.env, self.pass_fds = name, argv, env, pass_fds
        self.process: subprocess.Popen | None = None
        self.restarts = Restarts(name, **budget)

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.argv,
            cwd=BASE_DIR,
            env=self.env,
            pass_fds=self.pass_fds,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self.restarts.started()
        logger.info("%s started (pid %d)", self.name, self.process.pid)

    def check(self) -> None:
        """Restart the child when it died and its backoff has passed."""
        if self.process is not None and (code := self.process.poll()) is not None:
            self.kill_leftovers()
            self.process = None
            self.restarts.failed(f"exited with code {code}")
        if self.process is None and self.restarts.due():
            self.start()

    def terminate(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def kill_leftovers(self) -> None:
        """SIGKILL what is left of the child's process group (a dead arbiter's workers still hold the port)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def kill_group(self) -> None:
        if self.process is None:
            return
        self.kill_leftovers()
        self.process.wait()
        logger.warning("%s did not stop in time; killed", self.name)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class ModelServer(Child):
    """The embedded model (``AI_MEMORY_PROVIDER=embedded``): started before the cluster, probed, restarted; never fatal.

    A model that keeps failing is given up alone (the rest of the service runs; conversations wait
    for a model). While it runs, GET /health is probed every MODEL_PROBE_SECONDS after its load;
    MODEL_PROBE_FAILURES misses in a row kill it, and the restart policy brings it back.
    """

    def __init__(self, argv: list[str], env: dict[str, str], budget: dict, *, health_url: str, start_seconds: float):
        super().__init__("model", argv, env, budget)
        self.health_url, self.start_seconds = health_url, start_seconds
        self.gave_up = False
        self.misses = 0
        self.probe_at = 0.0

    def healthy(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(self.health_url, timeout=MODEL_PROBE_TIMEOUT) as response:
                return response.status == 200
        except OSError:  # refused, timed out, or 503 while the model loads (HTTPError is an OSError)
            return False

    def wait_ready(self, stopping) -> bool:
        """Until the model answers its health check (bounded by ``start_seconds``), it dies, or a stop signal."""
        deadline = time.monotonic() + self.start_seconds
        while time.monotonic() < deadline and not stopping() and self.running():
            if self.healthy():
                logger.info("model ready at %s", self.health_url.removesuffix("/health"))
                return True
            time.sleep(TICK * 2)
        logger.error(
            "the embedded model did not answer within %s s; the service runs, conversations wait for it",
            self.start_seconds,
        )
        return False

    def check(self) -> None:
        if self.gave_up:
            return
        try:
            super().check()
        except GiveUp as exc:
            self.gave_up = True
            logger.error("%s; the rest of the service runs, conversations wait for a model", exc)
            return
        now = time.monotonic()
        if not self.running() or now < max(self.probe_at, self.restarts.started_at + self.start_seconds):
            return
        self.probe_at = now + MODEL_PROBE_SECONDS
        self.misses = 0 if self.healthy() else self.misses + 1
        if self.misses >= MODEL_PROBE_FAILURES:
            logger.error("model missed %s health checks in a row; killing it", self.misses)
            self.misses = 0
            self.kill_leftovers()  # the next check sees it exited and restarts it
