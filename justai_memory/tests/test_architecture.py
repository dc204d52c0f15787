"""The import direction (justai_core <- people <- memories <- transcripts <- API wiring), checked by import-linter."""

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


def contract() -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(CONFIG)
    return config["importlinter:contract:apps-stack"]


def test_the_contract_stacks_the_four_apps_in_order_on_the_core():
    assert contract()["type"] == "layers"
    assert contract()["layers"].split() == ["justai_memory", "transcripts", "memories", "people", "justai_core"]


def test_only_tests_may_import_upwards():
    """No exception for code: every ignored import starts in a tests package."""
    ignored = [line.strip() for line in contract()["ignore_imports"].splitlines() if line.strip()]
    assert ignored
    code = [line for line in ignored if not line.startswith("#") and ".tests." not in line.split("->")[0]]
    assert not code, f"the layer contract ignores imports of code: {code}"


def test_the_contract_breaks_on_an_import_upwards(tmp_path):
    for package in ("people", "memories", "transcripts", "justai_memory", "justai_core"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "memories" / "views.py").write_text("import transcripts.models\n")
    (tmp_path / "transcripts" / "models.py").write_text("")
    (tmp_path / ".importlinter").write_text(CONFIG.read_text())
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "memories.views -> transcripts.models" in result.stdout


def test_the_core_may_not_import_an_app(tmp_path):
    for package in ("people", "memories", "transcripts", "justai_memory", "justai_core"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "justai_core" / "ai_router.py").write_text("import people.models\n")
    (tmp_path / "people" / "models.py").write_text("")
    (tmp_path / ".importlinter").write_text(CONFIG.read_text())
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "justai_core.ai_router -> people.models" in result.stdout
