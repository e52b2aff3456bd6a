"""The house keeps its floors (ARCHITECTURE.md): import contracts, readable rooms, one writer of a run's end."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
MAX_FUNCTION_LINES = 80
# Apps and the roof: what must stay small. Migrations are generated; tests and benchmarks are not rooms.
PACKAGES = (
    "portal",
    "testbed",
    "challenge_report",
    "sweeps",
    "live",
    "runs",
    "ingest",
    "results",
    "reports",
    "challenges",
    "sites",
    "common",
    "measure",
    "agent",
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


def test_the_access_policy_is_applied_by_restrict_outside_sites() -> None:
    """Who may read what is decided in sites/ (roles.py, permissions.py); the apps read through `.restrict(user)`
    (or sites.roles.experiments_visible), never by filtering on visible_experiment_ids themselves."""
    hand_filters = {
        name
        for name, path in _modules()
        if not name.startswith("sites.") and "sites.roles.visible_experiment_ids" in _imported_modules(name, path)
    }
    assert hand_filters == set()


def _calls(path: Path) -> Iterator[ast.Call]:
    yield from (node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call))


def _called_name(call: ast.Call) -> str:
    function = call.func
    return function.id if isinstance(function, ast.Name) else getattr(function, "attr", "")


def test_who_may_act_is_decided_in_the_access_policy_only() -> None:
    """Whether an actor may act is asked of sites' access policy (`restrict(user, action)`, `user_may`,
    `object_for`): no module outside sites.roles asks whether the user is a coordinator or lists their roles."""
    askers = {
        f"{name}:{call.lineno}"
        for name, path in _modules()
        if name != "sites.roles"
        for call in _calls(path)
        if _called_name(call) in ("user_is_coordinator", "user_roles")
    }
    assert askers == set()


def _root_name(node: ast.expr) -> str:
    """The name an expression starts from: `Challenge` of `Challenge.objects.select_related(...)`."""
    while isinstance(node, ast.Call | ast.Attribute):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def test_no_page_loads_a_challenge_without_the_access_policy() -> None:
    """A challenge is loaded by slug through challenges.selectors.challenge_for (404 unseen, 403 not allowed), never by
    get_object_or_404(Challenge, ...) that would show any challenge to anyone."""
    loaders = {
        f"{name}:{call.lineno}"
        for name, path in _modules()
        for call in _calls(path)
        if _called_name(call) == "get_object_or_404"
        and call.args
        and _root_name(call.args[0]) in ("Challenge", "challenges_visible")
    }
    assert loaders == set()


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
# or finished_at on a Run, whatever the means (an attribute and a save, a queryset's update, a create, a bulk update).
RUN_END_WRITER = "runs.ends"
RUN_STATES_UNDER_WAY = {"QUEUED", "RUNNING"}
WRITE_CALLS = {"update", "create", "get_or_create", "update_or_create", "Run", "RunFile"}


@dataclass(frozen=True)
class Write:
    """A field written: by an attribute assigned, a keyword of a writing call, or a name in the fields a save or a
    bulk update writes (value None: not known here); `on_run` when the call is made on `Run` (Run.objects...)."""

    field: str
    value: ast.expr | None
    line: int
    on_run: bool = False


def _on_run(node: ast.expr) -> bool:
    """Whether a call's chain starts at the name Run (Run(...), Run.objects.filter(...).update(...))."""
    while isinstance(node, ast.Attribute | ast.Call):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return isinstance(node, ast.Name) and node.id == "Run"


def _writes(tree: ast.AST) -> list[Write]:
    found: list[Write] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                items = target.elts if isinstance(target, ast.Tuple) else [target]
                paired = isinstance(node.value, ast.Tuple) and len(node.value.elts) == len(items)
                for index, item in enumerate(items):
                    if isinstance(item, ast.Attribute):
                        value = node.value.elts[index] if paired else node.value  # type: ignore[attr-defined]
                        found.append(Write(item.attr, value, node.lineno))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            on_run = _on_run(func)
            found.extend(
                Write(keyword.arg, keyword.value, node.lineno, on_run)
                for keyword in node.keywords
                if keyword.arg and name in WRITE_CALLS
            )
            named = [keyword.value for keyword in node.keywords if keyword.arg == "update_fields"]
            named += node.args[1:2] if name == "bulk_update" else []
            found.extend(
                Write(element.value, None, node.lineno, on_run)
                for fields in named
                if isinstance(fields, ast.List | ast.Tuple)
                for element in fields.elts
                if isinstance(element, ast.Constant) and isinstance(element.value, str)
            )
    return found


def _ended_run_state(value: ast.expr | None) -> bool:
    """Whether the value names a run's ended state (RunState.FINISHED, ...)."""
    return value is not None and any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "RunState"
        and node.attr not in RUN_STATES_UNDER_WAY
        for node in ast.walk(value)
    )


def _file_or_run_under_way(value: ast.expr | None) -> bool:
    """A state that is not a run's end: a file's state (FileState), an agent's job's (JobState), or a run's queued or
    running."""
    if isinstance(value, ast.IfExp):
        return _file_or_run_under_way(value.body) and _file_or_run_under_way(value.orelse)
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return value.value.id in ("FileState", "JobState") or (
            value.value.id == "RunState" and value.attr in RUN_STATES_UNDER_WAY
        )
    return False


def _writes_a_run_end(module: str, write: Write) -> bool:
    """In runs/, any finished_at and any state but a file's or a run's queued or running (a state in a variable
    cannot be told from an end); elsewhere, a run's ended state, or a state or finished_at written on Run."""
    if module.startswith("runs."):
        if write.field == "finished_at":
            return True
        # A state named among a save's fields was assigned above it, where it is judged.
        return write.field == "state" and write.value is not None and not _file_or_run_under_way(write.value)
    if write.on_run and write.field in ("state", "finished_at"):
        return True
    return write.field == "state" and _ended_run_state(write.value)


def test_only_run_end_writes_a_runs_end() -> None:
    """No module but runs.ends writes a run's end (its ended state or finished_at): the others call run_end."""
    writers = sorted(
        f"{path.relative_to(ROOT)}:{write.line} {write.field}"
        for name, path in _modules()
        if name != RUN_END_WRITER and not name.startswith("runs.probes.")
        for write in _writes(ast.parse(path.read_text()))
        if _writes_a_run_end(name, write)
    )
    assert writers == [], "end runs through runs.ends.run_end"


@pytest.mark.parametrize(
    ("module", "source", "found"),
    [
        ("runs.reaper", "run.state, run.finished_at = RunState.FAILED, now", ["state", "finished_at"]),
        ("runs.reaper", "run.state, run.message = run_outcome(total=1, ok=1)", ["state"]),
        ("runs.reaper", "Run.objects.filter(pk=1).update(state='failed')", ["state"]),
        ("runs.reaper", "Run.objects.bulk_update(runs, ['finished_at'])", ["finished_at"]),
        ("runs.reaper", "run.save(update_fields=['state', 'finished_at'])", ["finished_at"]),
        ("runs.reaper", "file.state = FileState.CANCELLED if cancelled else FileState.FAILED", []),
        ("runs.engine", "run.state = RunState.RUNNING", []),
        ("sweeps.services", "Run.objects.filter(pk=1).update(state='cancelled')", ["state"]),
        ("sweeps.services", "step.run.state = RunState.CANCELLED", ["state"]),
        ("sweeps.services", "step.state, step.finished_at = StepState.ENDED, now", []),
    ],
)
def test_the_run_end_scan_finds_every_way_of_writing_an_end(module: str, source: str, found: list[str]) -> None:
    assert [write.field for write in _writes(ast.parse(source)) if _writes_a_run_end(module, write)] == found


# A run's parameters are read through its kind (runs.kinds: typed, with their defaults), never by string key. The
# reads by key that remain are of other JSON named `parameters`, each named here with the reason.
PARAMETERS_READERS = "runs.kinds."
NOT_A_RUNS_PARAMETERS = {
    ("sweeps.services", "sweep.parameters"): "a sweep's own JSON (what it was asked, and its steps), not a run's",
    ("sweeps.plan", "step.parameters"): "a sweep step's request being built, before run_start checks it",
    ("sweeps.plan", "plan.parameters"): "the sweep plan's own parameters (SweepPlan), not a run's",
    ("agent.work", "parameters"): "a job's payload on the site (runs/agents/payloads.py sends the kind's to_dict): the "
    "agent imports no Django, so not runs.kinds",
}


def _parameters_read(node: ast.AST) -> str:
    """The expression read by key when `node` is `X.parameters[...]`, `X.parameters.get(...)`,
    `(X.parameters or {}).get(...)` or the same on a name `parameters`; "" otherwise."""
    if isinstance(node, ast.Subscript):
        target = node.value
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        target = node.func.value
    else:
        return ""
    if isinstance(target, ast.BoolOp):
        target = target.values[0]
    named = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return ast.unparse(target) if named == "parameters" else ""


def _parameters_reads(module: str, tree: ast.AST) -> list[str]:
    return [
        f"{module}:{node.lineno} {read}"  # type: ignore[attr-defined]
        for node in ast.walk(tree)
        if (read := _parameters_read(node)) and (module, read) not in NOT_A_RUNS_PARAMETERS
    ]


def test_a_runs_parameters_are_read_through_its_kind_only() -> None:
    """No module outside runs.kinds reads Run.parameters by key (`run.parameters["x"]`, `.get("x")`): they read the
    kind's typed parameters (`run_parameters(run).queue`, `TRANSFER.parameters(run).concurrency`). Migrations and
    tests are not scanned; the JSON that is not a run's is named in NOT_A_RUNS_PARAMETERS."""
    reads = sorted(
        read
        for name, path in _modules()
        if not name.startswith(PARAMETERS_READERS)
        for read in _parameters_reads(name, ast.parse(path.read_text()))
    )
    assert reads == [], "read a run's parameters through runs.kinds (run_parameters, KIND.parameters(run))"


@pytest.mark.parametrize(
    ("module", "source", "found"),
    [
        ("runs.engine", 'run.parameters["source"]', ["runs.engine:1 run.parameters"]),
        ("runs.engine", 'int(file.run.parameters.get("concurrency") or 1)', ["runs.engine:1 file.run.parameters"]),
        ("runs.views", '(run.parameters or {}).get("urls")', ["runs.views:1 run.parameters"]),
        ("runs.tasks", 'parameters["host"]', ["runs.tasks:1 parameters"]),
        ("sweeps.services", 'sweep.parameters["steps"]', []),
        ("sweeps.services", 'run.parameters.get("queue")', ["sweeps.services:1 run.parameters"]),
        ("runs.views", "sorted(run.parameters.items())", []),
        ("runs.engine", "TRANSFER.parameters(run).concurrency", []),
    ],
)
def test_the_parameters_scan_finds_every_read_by_key(module: str, source: str, found: list[str]) -> None:
    assert _parameters_reads(module, ast.parse(source)) == found
