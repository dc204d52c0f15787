"""The import direction (justai_core <- people <- memories <- transcripts <- connections <- API wiring, and inside the
wiring processes <- MCP | admin <- API | commands <- edge), by import-linter."""

import ast
import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

CONFIG = Path(settings.BASE_DIR) / ".importlinter"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_the_apps_import_only_downwards():
    result = lint_imports(Path(settings.BASE_DIR))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def contract() -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(CONFIG)
    return config["importlinter:contract:apps-stack"]


def test_the_contract_stacks_the_apps_in_order_on_the_core():
    assert contract()["type"] == "layers"
    assert contract()["layers"].split() == [
        "justai_memory",
        "connections",
        "transcripts",
        "memories",
        "people",
        "justai_core",
    ]


def test_only_tests_may_import_upwards():
    """No exception for code: every ignored import starts in a tests package."""
    ignored = [line.strip() for line in contract()["ignore_imports"].splitlines() if line.strip()]
    assert ignored
    code = [line for line in ignored if not line.startswith("#") and ".tests." not in line.split("->")[0]]
    assert not code, f"the layer contract ignores imports of code: {code}"


def skeleton(root: Path) -> None:
    """Empty packages of every app (and the memories packages a contract names) under ``root``, with the contracts."""
    for package in ("people", "memories", "transcripts", "connections", "justai_memory", "justai_core"):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
    for package in ("selectors", "services"):
        (root / "memories" / package).mkdir()
        (root / "memories" / package / "__init__.py").write_text("")
    for module in wiring_modules():
        path = root / Path(*module.split("."))
        for package in [*reversed(path.relative_to(root).parents)][1:]:
            (root / package).mkdir(exist_ok=True)
            (root / package / "__init__.py").touch()
        if (Path(settings.BASE_DIR) / path.relative_to(root)).is_dir():  # a package, as in the tree
            path.mkdir(exist_ok=True)
            (path / "__init__.py").touch()
        else:
            path.with_suffix(".py").touch()
    (root / ".importlinter").write_text(CONFIG.read_text())


def wiring_contract() -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(CONFIG)
    return config["importlinter:contract:wiring-layers"]


def wiring_layers() -> list[list[str]]:
    """The wiring contract's layers, top first, each the modules it holds."""
    return [re.split(r"\s*[|:]\s*", line.strip()) for line in wiring_contract()["layers"].splitlines() if line.strip()]


def wiring_modules() -> list[str]:
    return [module for layer in wiring_layers() for module in layer]


def test_every_module_of_the_wiring_sits_in_a_layer_of_its_contract():
    """A module added to justai_memory outside every layer would be free to import anything."""
    root = Path(settings.BASE_DIR)
    layered = wiring_modules()
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for path in (root / "justai_memory").rglob("*.py")
        if "tests" not in path.relative_to(root).parts
    }
    outside = sorted(
        module
        for module in modules - {"justai_memory", "justai_memory.serving"}
        if not any(module == name or module.startswith(f"{name}.") for name in layered)
    )
    assert not outside, f"name these in a layer of the wiring contract (.importlinter): {outside}"


def test_the_wiring_stacks_the_processes_on_mcp_on_the_api_on_the_edge():
    layers = wiring_layers()
    top = [i for i, layer in enumerate(layers) if "justai_memory.serving.supervisor" in layer]
    order = [
        next(i for i, layer in enumerate(layers) if name in layer)
        for name in ("justai_memory.serving.asgi", "justai_memory.mcp", "justai_memory.api", "justai_memory.edge")
    ]
    assert top == [0] and order == sorted(set(order))
    assert "justai_memory.admin" in layers[order[1]] and "justai_memory.management" in layers[order[2]]
    assert "justai_memory.serving.log_format" in layers[-1]


@pytest.mark.slow
def test_the_contract_breaks_on_an_import_upwards(tmp_path):
    skeleton(tmp_path)
    (tmp_path / "memories" / "views.py").write_text("import transcripts.models\n")
    (tmp_path / "transcripts" / "models.py").write_text("")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "memories.views -> transcripts.models" in result.stdout


@pytest.mark.slow
def test_the_core_may_not_import_an_app(tmp_path):
    skeleton(tmp_path)
    (tmp_path / "justai_core" / "ai_router.py").write_text("import people.models\n")
    (tmp_path / "people" / "models.py").write_text("")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "justai_core.ai_router -> people.models" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "importer, imported",
    [
        ("justai_memory.edge.answers", "justai_memory.api"),  # the edge's answers once came from the API
        ("justai_memory.mcp.auth", "justai_memory.serving.admission"),  # MCP once imported the serving package
        ("justai_memory.api.health", "justai_memory.mcp"),
    ],
)
def test_the_wiring_contract_breaks_on_an_import_back_up(tmp_path, importer, imported):
    skeleton(tmp_path)
    (tmp_path / Path(*importer.split("."))).with_suffix(".py").write_text(f"import {imported}\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert f"{importer} -> {imported}" in result.stdout


def test_the_memories_selectors_may_not_import_its_services():
    config = configparser.ConfigParser()
    config.read(CONFIG)
    selectors_read = config["importlinter:contract:memories-selectors-read"]
    assert selectors_read["type"] == "forbidden"
    assert selectors_read["source_modules"].split() == ["memories.selectors"]
    assert selectors_read["forbidden_modules"].split() == ["memories.services"]


@pytest.mark.slow
def test_the_contract_breaks_on_a_selector_that_imports_a_service(tmp_path):
    """Also through a module between them: recall's selectors once counted accesses through a service."""
    skeleton(tmp_path)
    (tmp_path / "memories" / "selectors" / "recall.py").write_text("import memories.access_counts\n")
    (tmp_path / "memories" / "access_counts.py").write_text("import memories.services.access\n")
    (tmp_path / "memories" / "services" / "access.py").write_text("")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "memories.selectors.recall -> memories.access_counts" in result.stdout


MAX_FUNCTION_LINES = 80


def app_packages() -> list[str]:
    """The app packages, read from the layer contract: an app added there is length-checked too."""
    return contract()["layers"].split()


def function_lengths(root: Path) -> dict[str, int]:
    """``{"memories/services/store.py:memory_store_batch": lines}`` for every function of the app code
    under ``root`` (tests and migrations left out), decorators and docstring included."""
    lengths = {}
    for package in app_packages():
        for path in sorted((root / package).rglob("*.py")):
            if {"tests", "migrations"} & set(path.relative_to(root).parts):
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                    lengths[f"{path.relative_to(root)}:{node.name}"] = node.end_lineno - first + 1
    return lengths


def test_no_function_of_the_app_code_is_longer_than_80_lines():
    lengths = function_lengths(Path(settings.BASE_DIR))
    assert len(lengths) > 500 and "memories/services/store.py:memory_store_batch" in lengths
    assert any(name.startswith("connections/") for name in lengths)
    long = {name: lines for name, lines in lengths.items() if lines > MAX_FUNCTION_LINES}
    assert not long, f"split these into named steps (at most {MAX_FUNCTION_LINES} lines each): {long}"


def test_the_function_length_check_counts_decorators_and_bodies(tmp_path):
    (tmp_path / "memories").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    (tmp_path / "memories" / "long.py").write_text(f"@decorated\ndef long():\n{body}\n\n\ndef short():\n    pass\n")
    (tmp_path / "memories" / "tests").mkdir()
    (tmp_path / "memories" / "tests" / "test_long.py").write_text(f"def test_long():\n{body}\n")
    for package in set(app_packages()) - {"memories"}:
        (tmp_path / package).mkdir()
    assert function_lengths(tmp_path) == {"memories/long.py:long": 82, "memories/long.py:short": 2}


WRITE_SQL = re.compile(r"\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+(\s+AS\s+\w+)?\s+SET)\b", re.IGNORECASE)


def test_selectors_hold_no_writing_sql():
    """Selectors read; a write (recall's access bump included) is a service's, which the selector calls."""
    root = Path(settings.BASE_DIR)
    selectors = [*root.glob("*/selectors.py"), *root.glob("*/selectors/*.py")]
    assert any(path.name == "recall.py" for path in selectors)
    writes = {
        f"{path.relative_to(root)}:{node.lineno}"
        for path in selectors
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and WRITE_SQL.search(node.value)
    }
    assert not writes, f"SQL that writes, in a selector: {sorted(writes)}"


def test_pytest_collects_the_tests_of_every_app():
    """An app whose tests are not in pytest.ini's testpaths is tested only when its tests are named."""
    ini = configparser.ConfigParser()
    ini.read(Path(settings.BASE_DIR) / "pytest.ini")
    collected = set(ini["pytest"]["testpaths"].split())
    with_tests = {path.parent.parent.name for path in Path(settings.BASE_DIR).glob("*/tests/__init__.py")}
    assert with_tests <= collected, f"add to testpaths in pytest.ini: {sorted(with_tests - collected)}"


def starts_a_process(node: ast.AST) -> bool:
    """A call of subprocess.run/Popen/check_output/check_call, or of a test helper that starts a
    server (``lint_imports``, ``*_process``, ``start_*``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
    return (owner == "subprocess" and name in {"run", "Popen", "check_output", "check_call"}) or (
        name in {"Popen", "lint_imports"}
    )


def is_slow(function: ast.FunctionDef, module: ast.Module) -> bool:
    marks = [*function.decorator_list]
    for node in module.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            marks.append(node.value)
    return any("slow" in ast.unparse(mark) for mark in marks)


def starting_functions(module: ast.Module, starting: set[str]) -> dict[str, ast.FunctionDef]:
    """The module's functions by name; ``starting`` grows by those that start a process themselves or call
    (or take as a fixture) one that does."""
    functions = {node.name: node for node in ast.walk(module) if isinstance(node, ast.FunctionDef)}
    starting |= {name for name, node in functions.items() if any(map(starts_a_process, ast.walk(node)))}
    for _ in range(3):  # helpers that call helpers that start a process
        starting |= {
            name
            for name, node in functions.items()
            if any(isinstance(call, ast.Call) and called_name(call.func) in starting for call in ast.walk(node))
            or any(arg.arg in starting for arg in node.args.args)
        }
    return functions


def called_name(func: ast.expr) -> str:
    """``f`` for ``f()``, ``module.f`` for ``module.f()`` (a function of an imported module), else ``""``."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f"{func.value.id}.{func.attr}"
    return getattr(func, "id", "")


def helpers_starting_a_process(root: Path) -> tuple[dict[str, set[str]], set[str]]:
    """``({"transcripts.tests.helpers": {names}}, conftest fixtures)``: what the tests' helper modules and
    conftest files hold that starts a process."""
    helpers, fixtures = {}, set()
    for path in sorted([*root.glob("*/tests/*.py"), *root.glob("conftest.py"), *root.glob("*/conftest.py")]):
        if path.name.startswith("test_"):
            continue
        starting: set[str] = set()
        starting_functions(ast.parse(path.read_text(), filename=str(path)), starting)
        if path.name == "conftest.py":
            fixtures |= starting
        helpers[".".join(path.relative_to(root).with_suffix("").parts)] = starting
    for path in sorted(root.glob("scripts/*.py")):  # imported by name once scripts/ is on sys.path
        starting = set()
        starting_functions(ast.parse(path.read_text(), filename=str(path)), starting)
        helpers[path.stem] = starting
    return helpers, fixtures


def process_starting_tests(root: Path) -> list[str]:
    """Tests (``test_*`` functions of the apps' test packages) that start a process themselves, through a
    helper or fixture of their own module or of a conftest, or through a helper module's function they
    import, and are not marked ``slow``."""
    helpers, conftest_fixtures = helpers_starting_a_process(root)
    unmarked = []
    for path in sorted(root.glob("*/tests/test_*.py")):
        module = ast.parse(path.read_text(), filename=str(path))
        starting = set(conftest_fixtures)
        for node in ast.walk(module):
            if isinstance(node, ast.ImportFrom) and node.module in helpers:
                starting |= {alias.asname or alias.name for alias in node.names if alias.name in helpers[node.module]}
            if isinstance(node, ast.Import):
                for alias in node.names:
                    starting |= {f"{alias.asname or alias.name}.{name}" for name in helpers.get(alias.name, ())}
        functions = starting_functions(module, starting)
        unmarked += [
            f"{path.relative_to(root)}:{name}"
            for name in sorted(starting & functions.keys())
            if name.startswith("test_") and not is_slow(functions[name], module)
        ]
    return unmarked


def test_tests_that_start_a_process_are_marked_slow():
    """The fast lane (-m "not browser and not slow") leaves out what starts real processes."""
    unmarked = process_starting_tests(Path(settings.BASE_DIR))
    assert not unmarked, f"mark these @pytest.mark.slow: {unmarked}"


def test_the_slow_mark_check_sees_a_helper_that_starts_a_process(tmp_path):
    (tmp_path / "app" / "tests").mkdir(parents=True)
    (tmp_path / "app" / "tests" / "test_x.py").write_text(
        "import subprocess\nimport pytest\n\n"
        "def run():\n    return subprocess.run(['true'])\n\n"
        "def test_unmarked():\n    run()\n\n"
        "@pytest.mark.slow\ndef test_marked():\n    run()\n\n"
        "def test_quick():\n    assert True\n"
    )
    assert process_starting_tests(tmp_path) == ["app/tests/test_x.py:test_unmarked"]


def test_the_slow_mark_check_follows_a_module_of_scripts_imported_by_name(tmp_path):
    (tmp_path / "app" / "tests").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "builder.py").write_text(
        "import subprocess\n\ndef main():\n    return subprocess.run(['true'])\n\ndef quiet():\n    return 1\n"
    )
    (tmp_path / "app" / "tests" / "test_x.py").write_text(
        "import pytest\n\n"
        "def test_unmarked():\n    import builder\n    builder.main()\n\n"
        "@pytest.mark.slow\ndef test_marked():\n    import builder\n    builder.main()\n\n"
        "def test_quick():\n    import builder\n    builder.quiet()\n"
    )
    assert process_starting_tests(tmp_path) == ["app/tests/test_x.py:test_unmarked"]


def test_the_slow_mark_check_sees_a_process_started_by_an_imported_helper_or_a_fixture(tmp_path):
    (tmp_path / "app" / "tests").mkdir(parents=True)
    (tmp_path / "app" / "tests" / "names.py").write_text(
        "import subprocess\n\ndef record():\n    return subprocess.run(['true'])\n\n"
        "def names():\n    return record()\n\ndef quiet():\n    return 1\n"
    )
    (tmp_path / "app" / "conftest.py").write_text(
        "import subprocess\nimport pytest\n\n@pytest.fixture\ndef server():\n    yield subprocess.Popen(['true'])\n"
    )
    (tmp_path / "app" / "tests" / "test_x.py").write_text(
        "import pytest\nfrom app.tests.names import names as read, quiet\n\n"
        "@pytest.fixture\ndef started():\n    return read()\n\n"
        "def test_imported():\n    read()\n\n"
        "def test_own_fixture(started):\n    pass\n\n"
        "def test_conftest_fixture(server):\n    pass\n\n"
        "@pytest.mark.slow\ndef test_marked():\n    read()\n\n"
        "def test_quick():\n    quiet()\n"
    )
    assert process_starting_tests(tmp_path) == [
        "app/tests/test_x.py:test_conftest_fixture",
        "app/tests/test_x.py:test_imported",
        "app/tests/test_x.py:test_own_fixture",
    ]


def test_the_architecture_doc_names_every_app_of_the_contract():
    doc = (Path(settings.BASE_DIR) / "docs" / "architecture.md").read_text()
    layers_table = doc.split("## Apps and layers", 1)[1].split("\n## ", 1)[0]
    missing = [package for package in app_packages() if f"`{package}/`" not in layers_table]
    assert not missing, f"docs/architecture.md's table of layers lacks: {missing}"


# At the wiring layer's top only what Django and the job cluster name by path; the rest is in packages.
WIRING_TOP = {"__init__.py", "household.py", "schedules.py", "settings.py", "settings_test.py", "urls.py"}
WIRING_PACKAGES = {"admin", "api", "edge", "management", "mcp", "serving", "tests"}


def test_the_wiring_layer_keeps_its_modules_in_packages_by_what_they_are():
    root = Path(settings.BASE_DIR) / "justai_memory"
    assert {path.name for path in root.glob("*.py")} == WIRING_TOP
    assert {path.parent.name for path in root.glob("*/__init__.py")} == WIRING_PACKAGES
    doc = (Path(settings.BASE_DIR) / "docs" / "architecture.md").read_text()
    layout = doc.split("## The wiring layer (`justai_memory/`)", 1)[1].split("\n## ", 1)[0]
    missing = [
        name for name in sorted(WIRING_TOP - {"__init__.py"} | WIRING_PACKAGES - {"tests"}) if f"`{name}" not in layout
    ]
    assert not missing, f"docs/architecture.md's layout of justai_memory/ lacks: {missing}"
