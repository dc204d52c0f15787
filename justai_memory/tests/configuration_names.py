"""The environment variables the project reads, the ones docs/configuration.md and .env.example name.

Read from the code, not from a list kept by hand: the settings modules (every ``env.<type>("NAME")``
call, also those built from f-strings, recorded while the settings file runs again, plus the
literal names of branches not taken), ``os.environ`` reads anywhere in the project's code, and the
``${NAME:-default}`` reads of the shell scripts.
"""

import ast
import configparser
import os
import re
import runpy
import warnings
from functools import cache
from pathlib import Path
from unittest import mock

import environ

ROOT = Path(__file__).resolve().parents[2]


def contract_apps() -> tuple[str, ...]:
    """The app packages of the import contract (.importlinter): an app added there is read too."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return tuple(config["importlinter:contract:apps-stack"]["layers"].split())


APPS = contract_apps()
NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def settings_files() -> list[Path]:
    package = ROOT / "justai_memory"
    return sorted({*package.glob("settings*.py"), *package.glob("settings/*.py"), *package.glob("*settings.py")})


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.match(node.value):
        return node.value
    return None


def _is_os_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", None) == "os"


def names_in_python(source: str, *, settings_module: bool) -> set[str]:
    """Variable names a module reads: os.environ.get/[]/in, os.getenv; in settings also env.*("NAME")."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and (name := _literal(node.args[0])):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and _is_os_environ(func.value):
                names.add(name)
            elif isinstance(func, ast.Attribute) and func.attr == "getenv" and getattr(func.value, "id", None) == "os":
                names.add(name)
            elif settings_module and isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "env":
                names.add(name)
            elif settings_module and isinstance(func, ast.Name) and func.id == "env":
                names.add(name)
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value) and isinstance(node.ctx, ast.Load):
            if name := _literal(node.slice):
                names.add(name)
        elif isinstance(node, ast.Compare) and (name := _literal(node.left)):
            if any(_is_os_environ(c) for c in node.comparators):
                names.add(name)
    return names


@cache
def recorded_settings_names() -> frozenset[str]:
    """What the settings read while they load (f-string names included): the settings file run again in this
    process with every ``env`` read recorded, in the environment a shell would give it (pytest's variables
    left out) and a database URL that is never opened; the environment is restored afterwards."""
    names = set()
    get_value = environ.Env.get_value

    def recording(self, var, *args, **kwargs):
        names.add(var)
        return get_value(self, var, *args, **kwargs)

    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    environment["DATABASE_URL"] = "postgres://check:check@127.0.0.1:9/check"
    with (
        mock.patch.object(environ.Env, "get_value", recording),
        mock.patch.dict(os.environ, environment, clear=True),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        runpy.run_path(str(ROOT / "justai_memory" / "settings.py"), run_name="justai_memory.recorded_settings")
    return frozenset(names)


def script_names() -> set[str]:
    """What scripts/ reads (``${NAME:-default}`` in shell, os.environ in Python), the test commands left out."""
    names = set()
    for script in (ROOT / "scripts").iterdir():
        if not script.is_file() or script.name.startswith("test"):
            continue
        text = script.read_text(errors="replace")
        if script.suffix == ".py" or text.startswith("#!/usr/bin/env python"):
            names |= names_in_python(text, settings_module=False)
        else:
            names |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*):?[-=]", text))
    return names


@cache
def project_names() -> frozenset[str]:
    """Every variable the project reads: settings, the apps' code outside tests, the scripts."""
    names = set(recorded_settings_names()) | script_names()
    for path in settings_files():
        names |= names_in_python(path.read_text(), settings_module=True)
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "tests" not in path.relative_to(ROOT).parts:
                names |= names_in_python(path.read_text(), settings_module=False)
    # The API keys' names come from the provider presets (AI_<ROLE>_API_KEY_ENV names the variable).
    from justai_core.ai_router import PRESETS

    names |= {preset.api_key_env for preset in PRESETS.values() if preset.api_key_env}
    return frozenset(names)


def documented_names() -> dict[str, list[str]]:
    """docs/configuration.md's one table: {variable: [default, meaning]}; asserts there is exactly one such table."""
    lines = (ROOT / "docs" / "configuration.md").read_text().splitlines()
    headers = [i for i, line in enumerate(lines) if re.match(r"^\|\s*variable\s*\|", line)]
    assert len(headers) == 1, f"docs/configuration.md must have ONE settings table, found {len(headers)}"
    rows = {}
    for line in lines[headers[0] + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        names = re.findall(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        assert names, f"a row without a variable name: {line}"
        for name in names:
            assert name not in rows, f"{name} has two rows"
            rows[name] = cells[1:]
    return rows


def env_example_names() -> set[str]:
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.MULTILINE))


def production_variables() -> dict[str, str]:
    """The indented NAME=value lines of docs/configuration.md's "Production behind a TLS proxy" section."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text.split("## Production behind a TLS proxy", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^ {4}([A-Z][A-Z0-9_]*)=(\S*)$", section, re.MULTILINE))
