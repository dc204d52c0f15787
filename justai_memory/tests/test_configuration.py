"""docs/configuration.md's table, .env.example and the variables the code reads name the same settings."""

import ast
import re

from justai_memory.tests.configuration_names import (
    APPS,
    ROOT,
    documented_names,
    env_example_names,
    names_in_python,
    project_names,
    recorded_settings_names,
)


def test_every_variable_the_project_reads_has_a_row_in_the_configuration_table():
    missing = sorted(project_names() - documented_names().keys())
    assert not missing, f"add a row to docs/configuration.md (and a line to .env.example) for: {missing}"


def test_every_documented_variable_is_read_by_the_project():
    stale = sorted(documented_names().keys() - project_names())
    assert not stale, f"docs/configuration.md documents variables nothing reads: {stale}"


def test_env_example_lists_exactly_the_documented_variables():
    documented, example = set(documented_names()), env_example_names()
    assert not documented - example, f"missing in .env.example: {sorted(documented - example)}"
    assert not example - documented, f"in .env.example but not in docs/configuration.md: {sorted(example - documented)}"


def test_every_row_gives_a_default_and_a_meaning():
    for name, cells in documented_names().items():
        assert len(cells) == 2 and all(cells), f"{name}: the row needs a default and a meaning"


def test_the_settings_reads_include_names_built_at_run_time():
    # The AI roles' names are f-strings: only the recording sees them. Without it the check above is blind to them.
    assert {"AI_MEMORY_PROVIDER", "AI_MEMORY_BASE_URL", "DJANGO_SECURE_COOKIES"} <= recorded_settings_names()


def test_the_code_of_every_package_but_the_benches_is_read():
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")} - {"bench"}
    assert packages == set(APPS), "connections and justai_core read the environment too"


def test_the_reader_finds_each_way_of_reading_a_variable():
    source = """
import os
a = os.environ.get("READ_GET", "x")
b = os.environ["READ_ITEM"]
c = os.getenv("READ_GETENV")
d = "READ_IN" in os.environ
os.environ.setdefault("WRITTEN", "1")
os.environ["ASSIGNED"] = "1"
e = env.int("READ_ENV", default=1)
f = env("READ_CALL")
"""
    ast.parse(source)
    assert names_in_python(source, settings_module=True) == {
        "READ_GET",
        "READ_ITEM",
        "READ_GETENV",
        "READ_IN",
        "READ_ENV",
        "READ_CALL",
    }
    assert "READ_ENV" not in names_in_python(source, settings_module=False)


PROJECT_APPS = {"justai_memory", "connections", "transcripts", "memories", "people"}


def settings_default(name: str):
    """The literal ``default=`` of ``env.<kind>("NAME", default=...)`` in settings.py."""
    source = (ROOT / "justai_memory" / "settings.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            if node.args[0].value == name:
                return next(ast.literal_eval(k.value) for k in node.keywords if k.arg == "default")
    raise AssertionError(f"settings.py does not read {name}")


def test_the_documented_allowed_hosts_are_the_settings_default():
    documented = documented_names()["DJANGO_ALLOWED_HOSTS"][0].strip("`")
    assert documented.split(",") == settings_default("DJANGO_ALLOWED_HOSTS")


def test_the_documented_local_name_suffixes_are_the_address_rules():
    from justai_core.ai_router import LOCAL_SUFFIXES

    meaning = documented_names()["AI_MEMORY_LOCATION"][1]
    documented = re.search(r"((?:`\.[a-z.]+`/?)+) names", meaning).group(1)
    assert tuple(re.findall(r"`(\.[a-z.]+)`", documented)) == LOCAL_SUFFIXES


def test_operations_lists_every_command_and_every_schedule():
    from django.core.management import get_commands

    from justai_memory.schedules import SCHEDULES

    operations = (ROOT / "docs" / "operations.md").read_text()
    ours = {name for name, app in get_commands().items() if app.split(".")[0] in PROJECT_APPS}
    assert "fetch_model" in ours
    missing = {name for name in ours if f"| `{name}" not in operations}
    missing |= {spec.name for spec in SCHEDULES if f"| `{spec.name}` |" not in operations}
    assert not missing, f"docs/operations.md has no row for: {sorted(missing)}"
