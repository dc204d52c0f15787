"""OAuth races: refresh, code exchange and approval of one grant sent twice at once, against the service as shipped.

    flock /tmp/justai-bench.lock .venv/bin/python bench/oauth_races.py              # 50 trials of each race
    .venv/bin/python bench/oauth_races.py --trials 10

Starts ``./scripts/run`` on a throwaway data folder (gunicorn, two uvicorn workers, 127.0.0.1, a free port), adds a
room, logs the admin's browser in, then per trial registers a new client (RFC 7591, no secret, PKCE) and fires two
requests released by one ``threading.Barrier``, each on its own connection (connections/tests/oauth_races.py):

- **refresh**: one refresh token sent twice at once. Counts the statuses, 5xx, ``invalid_grant`` answers, and
  trials whose issued pair works afterwards (the access token opens /mcp, or its refresh token refreshes).
- **code**: one code exchanged twice at once. Counts the statuses, 5xx, and tokens still live afterwards.
- **approval**: the consent form's Allow posted twice at once. Counts the client's live connections.

The baseline of the same run: each race's two requests sent one after the other. Prints per row the counts and the
time of a trial (p50/p95). Loopback only; every loop is bounded by ``--trials``.
"""

import argparse
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._django import percentile
from connections.tests.oauth_races import (
    Household,
    approval_race,
    at_once,
    code_race,
    one_after_the_other,
    refresh_race,
)
from justai_memory.tests.test_service import ADMIN_PASSWORD, Service

LIVE_CONNECTIONS = (
    "SELECT count(*) FROM connections_connection c JOIN oauth2_provider_application a ON a.id = c.application_id "
    "WHERE a.client_id = %s AND c.revoked_at IS NULL"
)


def run_race(name: str, trials: int, household: Household, choices: dict, service: Service, fire) -> dict:
    statuses, errors, seconds = Counter(), Counter(), []
    live_tokens = live_pairs = fives = 0
    connections = Counter()
    for _ in range(trials):
        started = time.monotonic()
        if name == "approval":
            trial, client_id = approval_race(household, choices, fire)
            with service.database() as conn:
                connections[conn.execute(LIVE_CONNECTIONS, [client_id]).fetchone()[0]] += 1
        else:
            trial = (refresh_race if name == "refresh" else code_race)(household, choices, fire)
            live_tokens += trial.live_tokens
            live_pairs += trial.live_tokens > 0
        seconds.append(time.monotonic() - started)
        statuses.update(trial.statuses)
        errors.update(error for error in trial.errors if error)
        fives += sum(status >= 500 for status in trial.statuses)
    return {
        "statuses": dict(sorted(statuses.items())),
        "5xx": fives,
        "errors": dict(errors),
        "live_tokens": live_tokens,
        "trials_with_a_live_pair": live_pairs,
        "live_connections": dict(sorted(connections.items())),
        "p50": percentile(seconds, 50),
        "p95": percentile(seconds, 95),
    }


def report(label: str, name: str, trials: int, row: dict) -> None:
    line = f"{label:<22} {name:<9} trials {trials:>3}  statuses {row['statuses']}  5xx {row['5xx']}"
    if name == "refresh":
        line += f"  invalid_grant {row['errors'].get('invalid_grant', 0)}  trials with a live pair {row['trials_with_a_live_pair']}"
    elif name == "code":
        line += f"  invalid_grant {row['errors'].get('invalid_grant', 0)}  live tokens {row['live_tokens']}"
    else:
        line += f"  live connections per trial {row['live_connections']}"
    print(f"{line}  trial p50 {row['p50'] * 1000:.0f} ms p95 {row['p95'] * 1000:.0f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50, help="trials of each race (default 50)")
    parser.add_argument("--races", default="refresh,code,approval", help="which races, comma-separated")
    args = parser.parse_args()
    trials = max(1, min(args.trials, 1000))
    data_dir = Path(tempfile.mkdtemp(prefix="justai-bench-oauth-"))
    service = Service(data_dir / "data", data_dir / "service.log")
    try:
        service.start()
        service.manage("add_room", "Kitchen")
        with service.database() as conn:
            room_id = conn.execute("SELECT id FROM people_room WHERE name = 'Kitchen'").fetchone()[0]
        household = Household(service.url(""), "admin", ADMIN_PASSWORD)
        choices = {"room": room_id, "speaker": "", "model_location": "local", "access": "memory:read"}
        print(f"./scripts/run on 127.0.0.1:{service.port}, 2 web workers; {trials} trials per race", flush=True)
        for name in args.races.split(","):
            report("at once", name, trials, run_race(name, trials, household, choices, service, at_once))
            baseline = run_race(name, trials, household, choices, service, one_after_the_other)
            report("one after the other", name, trials, baseline)
    finally:
        if service.process is not None and service.process.poll() is None:
            service.stop(signal.SIGTERM)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
