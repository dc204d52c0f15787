"""Deployment: `check --deploy` with the documented production variables, and deploy/'s files against the settings.

Docker cannot run on the machines the suite runs on, so the compose file and the Dockerfile are
parsed and compared with what the project reads, not built or started.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from justai_memory.tests.configuration_names import ROOT, production_variables, project_names

DEPLOY = ROOT / "deploy"
# Variables of the tools in the image, not of the project (Python's and pip's own).
TOOL_VARIABLES = {"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_CACHE_DIR"}
# The pgvector/pgvector image's (the official postgres image's) variables.
POSTGRES_IMAGE_VARIABLES = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "PGDATA"}
DEFAULT_DEPLOY_WARNINGS = {"security.W004", "security.W008", "security.W012", "security.W016"}


def check_deploy(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    """`manage.py check --deploy` in a fresh process: only our variables, a database URL that is never opened."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST", "DJANGO_")) and k not in {"DATABASE_URL", "JUSTAI_DATA_DIR"}
    }
    environment.update(
        DATABASE_URL="postgres://check:check@127.0.0.1:9/check", JUSTAI_DATA_DIR=str(tmp_path), **variables
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_check_deploy_warns_without_the_production_variables(tmp_path):
    result = check_deploy(tmp_path)
    assert result.returncode == 1
    assert DEFAULT_DEPLOY_WARNINGS <= set(re.findall(r"security\.W\d+", result.stderr)), result.stderr


@pytest.mark.slow
def test_check_deploy_is_clean_with_the_documented_production_variables(tmp_path):
    variables = production_variables()
    assert {"DJANGO_SECURE_COOKIES", "DJANGO_SECURE_PROXY_SSL_HEADER", "DJANGO_SECURE_HSTS_SECONDS"} <= set(variables)
    assert {"DJANGO_ALLOWED_HOSTS", "DJANGO_CSRF_TRUSTED_ORIGINS"} <= set(variables)
    result = check_deploy(tmp_path, **variables)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNINGS" not in result.stderr


@pytest.mark.slow
def test_the_production_variables_reach_the_settings(tmp_path):
    shown = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.conf import settings as s; print(s.SECURE_PROXY_SSL_HEADER, s.SESSION_COOKIE_SECURE, "
            "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.ALLOWED_HOSTS, s.CSRF_TRUSTED_ORIGINS)",
        ],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_"))},
            "DATABASE_URL": "postgres://check:check@127.0.0.1:9/check",
            "JUSTAI_DATA_DIR": str(tmp_path),
            **production_variables(),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1] == (
        "('HTTP_X_FORWARDED_PROTO', 'https') True True 31536000 ['memory.home.arpa'] ['https://memory.home.arpa']"
    )


# --- the systemd unit ----------------------------------------------------------------------------


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """systemd's INI dialect: sections of keys that may repeat (Environment=), comments with # or ;."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if match := re.fullmatch(r"\[(\w+)\]", line):
            current = sections.setdefault(match.group(1), {})
            continue
        key, sep, value = line.partition("=")
        assert current is not None and sep, f"not a unit line: {raw!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def unit_environment(service: dict[str, list[str]]) -> dict[str, str]:
    variables = {}
    for line in service.get("Environment", []):
        for assignment in shlex.split(line):
            name, _, value = assignment.partition("=")
            variables[name] = value
    return variables


def test_the_systemd_unit_runs_the_run_command_and_lets_it_stop_the_tree():
    unit = parse_unit(DEPLOY / "justai-memory.service")
    service = unit["Service"]
    assert service["ExecStart"] == [f"{service['WorkingDirectory'][0]}/scripts/run"]
    assert (ROOT / "scripts" / "run").exists()
    assert service["Restart"] == ["on-failure"]
    assert service["KillSignal"] == ["SIGTERM"]
    assert service["KillMode"] == ["mixed"]  # SIGTERM to the run command only: it stops the database last
    assert int(service["TimeoutStopSec"][0]) > 15  # the tree stops within 15 s
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_the_systemd_unit_sets_only_variables_the_project_reads():
    variables = unit_environment(parse_unit(DEPLOY / "justai-memory.service")["Service"])
    assert {"JUSTAI_DATA_DIR", "JUSTAI_HOST", "JUSTAI_PORT"} <= set(variables)
    assert not set(variables) - project_names(), sorted(set(variables) - project_names())


# --- the Dockerfile ------------------------------------------------------------------------------


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments left out."""
    joined, instructions = "", []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        joined += line.removesuffix("\\") + " "
        if not line.endswith("\\"):
            keyword, _, arguments = " ".join(joined.split()).partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
            joined = ""
    return instructions


def test_the_dockerfile_sets_only_known_variables_and_runs_the_run_command():
    instructions = dockerfile_instructions(DEPLOY / "Dockerfile")
    variables = {}
    for keyword, arguments in instructions:
        if keyword == "ENV":
            variables.update(assignment.split("=", 1) for assignment in shlex.split(arguments))
    assert not set(variables) - project_names() - TOOL_VARIABLES, sorted(set(variables) - project_names())
    assert variables["JUSTAI_HOST"] == "0.0.0.0"  # reachable through the published port
    last = dict(instructions)
    assert last["CMD"] == '["./scripts/run"]'
    assert last["STOPSIGNAL"] == "SIGTERM"
    assert last["EXPOSE"] == variables["JUSTAI_PORT"]
    assert variables["JUSTAI_DATA_DIR"] in last["VOLUME"]
    assert last["FROM"].startswith("python:3.11")


def test_the_image_and_the_test_script_install_the_search_dictionaries():
    from memories.dictionary import FREEDICT_PACKAGES

    installs = [arguments for keyword, arguments in dockerfile_instructions(DEPLOY / "Dockerfile") if keyword == "RUN"]
    installed = " ".join(arguments for arguments in installs if "apt-get install" in arguments).split()
    assert set(FREEDICT_PACKAGES) <= set(installed)
    script = re.search(r'^FREEDICT="([^"]*)"', (ROOT / "scripts" / "test").read_text(), re.MULTILINE)
    assert set(script.group(1).split()) == set(FREEDICT_PACKAGES)


# --- the compose file ----------------------------------------------------------------------------


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_runs_the_app_against_postgresql_with_pgvector():
    services = compose()["services"]
    db, app = services["db"], services["app"]
    assert db["image"].startswith("pgvector/pgvector:")
    assert app["depends_on"]["db"]["condition"] == "service_healthy"
    assert (DEPLOY / app["build"]["context"] / app["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    url = re.fullmatch(r"postgres://([^:]+):(.+)@([^:/]+):(\d+)/(\w+)", app["environment"]["DATABASE_URL"])
    assert url, app["environment"]["DATABASE_URL"]
    user, password, host, port, name = url.groups()
    assert (user, password, host, port, name) == (
        db["environment"]["POSTGRES_USER"],
        db["environment"]["POSTGRES_PASSWORD"],
        "db",
        "5432",
        db["environment"]["POSTGRES_DB"],
    )
    published = [entry.rsplit(":", 1)[1] for entry in app["ports"]]
    assert published == [app["environment"]["JUSTAI_PORT"]]
    assert app["environment"]["JUSTAI_HOST"] == "0.0.0.0"
    assert app["stop_signal"] == "SIGTERM"


def test_compose_sets_only_variables_the_project_or_the_images_read():
    services = compose()["services"]
    app_variables = set(services["app"]["environment"])
    assert not app_variables - project_names(), sorted(app_variables - project_names())
    db_variables = set(services["db"]["environment"])
    assert not db_variables - POSTGRES_IMAGE_VARIABLES, sorted(db_variables - POSTGRES_IMAGE_VARIABLES)


def test_compose_inputs_are_settings_or_explained_in_the_operations_page():
    inputs = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (DEPLOY / "compose.yaml").read_text()))
    operations = (ROOT / "docs" / "operations.md").read_text()
    unexplained = {name for name in inputs - project_names() if f"`{name}`" not in operations}
    assert not unexplained, f"explain these compose inputs in docs/operations.md: {sorted(unexplained)}"


def test_the_unit_reader_and_the_dockerfile_reader_see_what_they_should(tmp_path):
    unit = tmp_path / "x.service"
    unit.write_text('[Service]\n# c\nEnvironment=A=1 "B=two words"\nEnvironment=C=3\nExecStart=/x\n')
    assert unit_environment(parse_unit(unit)["Service"]) == {"A": "1", "B": "two words", "C": "3"}
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM x\n# ENV HIDDEN=1\nENV A=1 \\\n    B=2\nCMD ["y"]\n')
    assert dockerfile_instructions(dockerfile) == [("FROM", "x"), ("ENV", "A=1 B=2"), ("CMD", '["y"]')]
