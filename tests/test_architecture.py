"""The house keeps its floors (ARCHITECTURE.md): import contracts, and rooms of a readable size."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
MAX_FUNCTION_LINES = 80
# Apps and the roof: what must stay small. Migrations are generated; tests and benchmarks are not rooms.
PACKAGES = (
    "portal",
    "testbed",
    "sweeps",
    "live",
    "runs",
    "ingest",
    "results",
    "reports",
    "challenges",
    "sites",
    "common",
)


def test_the_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_no_module_is_longer_than_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concern: {long}"


def _modules() -> list[tuple[str, Path]]:
    """Every module of the apps and the roof, by its dotted name, migrations left out."""
    return [
        (".".join(path.relative_to(ROOT).with_suffix("").parts), path)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _imported_modules(name: str, path: Path) -> set[str]:
    """The modules `name` imports (relative imports resolved), with each name imported from them as a module too."""
    package = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_no_page_view_or_other_module_outside_an_api_imports_an_api_module() -> None:
    """Reads live in each app's selectors.py (filters in filters.py): a page never borrows them from the API,
    so that an API module can change without a page noticing. Only URL confs mount the API, by string."""
    borrowed = {
        name: sorted(imported for imported in _imported_modules(name, path) if "api" in imported.split(".")[1:2])
        for name, path in _modules()
        if "api" not in name.split(".")
    }
    assert {name: modules for name, modules in borrowed.items() if modules} == {}


def test_no_function_is_longer_than_80_lines() -> None:
    """A function of the apps and the roof reads on one screen or two (tests, migrations and bench are not
    counted); ruff's PLR0915 (max-statements in pyproject.toml) says the same while one writes."""
    long = {
        f"{path.relative_to(ROOT)} {node.name}": lines
        for _, path in _modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert long == {}, "split these"


# Still handed the set of experiment ids rather than a restricted queryset: the matrix and failure pages pass it on
# to SQL built by results.matrix and results.failures with the experiment the reader picked (see the report of #28).
HAND_SCOPED = {"results.matrix.views"}


def test_the_access_policy_is_applied_by_restrict_outside_sites() -> None:
    """Who may read what is decided in sites/ (roles.py, permissions.py); the apps read through `.restrict(user)`
    (or sites.roles.experiments_visible), never by filtering on visible_experiment_ids themselves."""
    hand_filters = {
        name
        for name, path in _modules()
        if not name.startswith("sites.") and "sites.roles.visible_experiment_ids" in _imported_modules(name, path)
    }
    assert hand_filters <= HAND_SCOPED, sorted(hand_filters - HAND_SCOPED)


def test_no_test_module_imports_another() -> None:
    """What tests share is in a helpers module or a conftest fixture: importing a test module runs (and collects)
    its tests' module a second time under another name."""
    borrowed = {
        str(path.relative_to(ROOT)): sorted(
            imported
            for imported in _imported_modules(name, path)
            if imported.startswith("tests.") and imported.split(".")[-1].startswith("test_")
        )
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (name := ".".join(path.relative_to(ROOT).with_suffix("").parts))
    }
    assert {path: modules for path, modules in borrowed.items() if modules} == {}


# runs.ends.run_end is the one writer of a run's end (ARCHITECTURE.md, runs/): no other module sets an ended state
# or finished_at on a Run, whatever the means (an attribute and a save, a queryset's update, a create).
RUN_END_WRITER = "runs.ends"
RUN_STATES_UNDER_WAY = {"QUEUED", "RUNNING"}
WRITE_CALLS = {"update", "create", "get_or_create", "update_or_create", "bulk_create", "Run", "RunFile"}


def _safe_state(value: ast.expr, *, strict: bool) -> bool:
    """A state written that is not a run's end: a file's state, or a run's queued or running. Outside runs/ (not
    `strict`) any value but a run's ended state is left to its own app."""
    if isinstance(value, ast.IfExp):
        return _safe_state(value.body, strict=strict) and _safe_state(value.orelse, strict=strict)
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        if value.value.id == "RunState":
            return value.attr in RUN_STATES_UNDER_WAY
        return value.value.id == "FileState" or not strict
    return not strict and not any(
        isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "RunState"
        for node in ast.walk(value)
    )


def _state_writes(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """(field, value) of each attribute assigned and each keyword given to a writing call, pairing tuple targets
    with tuple values; `update_fields` names count as writes of those fields with an unknown value."""
    found: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                targets = target.elts if isinstance(target, ast.Tuple) else [target]
                values = (
                    node.value.elts
                    if isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(targets)
                    else None
                )
                for index, item in enumerate(targets):
                    if isinstance(item, ast.Attribute):
                        found.append((item.attr, values[index] if values else node.value))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            for keyword in node.keywords:
                if name in WRITE_CALLS and keyword.arg:
                    found.append((keyword.arg, keyword.value))
                if keyword.arg == "update_fields" and isinstance(keyword.value, ast.List | ast.Tuple):
                    found.extend(
                        (element.value, keyword.value)
                        for element in keyword.value.elts
                        if isinstance(element, ast.Constant) and element.value == "finished_at"
                    )
    return found


def test_only_run_end_writes_a_runs_end() -> None:
    """In runs/ no module but runs.ends writes a run's finished_at or a state other than a file's, or a run's queued
    or running; no module of another app writes a run's ended state."""
    writers = sorted(
        f"{path.relative_to(ROOT)}:{value.lineno} {field}"
        for name, path in _modules()
        if name != RUN_END_WRITER and not name.startswith("runs.probes.")
        for field, value in _state_writes(ast.parse(path.read_text()))
        if (name.startswith("runs.") and field == "finished_at")
        or (field == "state" and not _safe_state(value, strict=name.startswith("runs.")))
    )
    assert writers == [], "end runs through runs.ends.run_end"
