"""The import direction (people <- memories <- transcripts <- API wiring), checked by import-linter's contract."""

import configparser
import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

CONFIG = Path(settings.BASE_DIR) / ".importlinter"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_apps_import_only_downwards():
    result = lint_imports(Path(settings.BASE_DIR))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_the_contract_stacks_the_four_apps_in_order():
    config = configparser.ConfigParser()
    config.read(CONFIG)
    contract = config["importlinter:contract:apps-stack"]
    assert contract["type"] == "layers"
    assert contract["layers"].split() == ["justai_memory", "transcripts", "memories", "people"]


def test_the_contract_breaks_on_an_import_upwards(tmp_path):
    for package in ("people", "memories", "transcripts", "justai_memory"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "memories" / "views.py").write_text("import transcripts.models\n")
    (tmp_path / "transcripts" / "models.py").write_text("")
    (tmp_path / ".importlinter").write_text(CONFIG.read_text())
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "memories.views -> transcripts.models" in result.stdout
