"""What every probe kind is made of (ProbeKind) and what every run keeps besides its kind's own parameters
(RunParameters): a kind's parameters are a frozen dataclass, checked by field (`from_dict`), read back leniently
from a row (`stored`: rows written before a field existed read its default) and written as the run's JSON
(`to_dict`)."""

from __future__ import annotations

import functools
import threading
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

from measure.context import ProbeContext
from measure.outcomes import FileOutcome

from .fields import Problems

if TYPE_CHECKING:
    from challenges.models import Activity
    from sites.models import Experiment, Site

    from ..models import Run

Grants = list[tuple[str, str]]
# What a one-task probe gives: its files (records), its summary (Run.summary) and an error ("" when it worked).
ProbeResult = tuple[list[FileOutcome], dict[str, Any], str]
# Fields of this metadata are left out of the run's JSON when None (the plan did not choose them).
OMIT_NONE = {"omit_none": True}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A parameters class's field types (resolved once per class: a run's parameters are read on every file)."""
    return typing.get_type_hints(cls)


def _fits(value: Any, hint: Any) -> bool:
    """Whether a stored value is of the field's type (a row may hold anything: old runs, hand-made rows)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arm) for arm in typing.get_args(hint) if arm is not type(None))
    if origin is not None:
        return isinstance(value, origin)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


@dataclass(frozen=True, kw_only=True)
class RunParameters:
    """What every run keeps, whatever its kind: the Celery queue its tasks go to, the site whose worker runs it,
    the experiment it measures for and what started it (user, schedule, sweep)."""

    queue: str = ""
    site: str | None = None
    experiment: str | None = None
    trigger: str = ""

    @classmethod
    def check(cls, given: dict[str, Any], problems: Problems) -> dict[str, Any]:
        """The kind's own fields of `given`, checked for type and range (each problem added by field); the
        common fields are checked by from_dict. Kinds override this."""
        return {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The parameters as stored (to_dict's form), every field checked: a ValidationError by field, with the
        reason, for an unknown name or a value of the wrong type or range."""
        problems = Problems()
        if not isinstance(data, Mapping):
            problems.add("parameters", f"parameters must be an object of names and values, not {data!r}")
            problems.raise_any()
        known = [item.name for item in fields(cls)]
        for name in sorted(set(data) - set(known)):
            problems.add(name, f"unknown parameter {name!r} (known: {', '.join(known)})")
        values = cls.check(dict(data), problems)
        hints = _hints(RunParameters)
        for name in ("queue", "site", "experiment", "trigger"):
            if name in data and not (_fits(data[name], hints[name]) or (data[name] is None and name != "queue")):
                problems.add(name, f"{name} must be text, not {data[name]!r}")
            elif data.get(name) is not None:
                values[name] = data[name]
        problems.raise_any()
        return cls(**values)

    @classmethod
    def stored(cls, data: Any) -> Self:
        """The parameters a run's row holds, never raising: a name missing, None or of the wrong type reads as
        the field's default (a row from before the field, or made by hand); unknown names are ignored."""
        data = data if isinstance(data, Mapping) else {}
        hints = _hints(cls)
        values = {
            item.name: data[item.name]
            for item in fields(cls)
            if data.get(item.name) is not None and _fits(data[item.name], hints[item.name])
        }
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The run's JSON (Run.parameters): every field, those the plan did not choose (None) left out."""
        return {
            item.name: value
            for item in fields(self)
            if not ((value := getattr(self, item.name)) is None and item.metadata.get("omit_none"))
        }

    @property
    def keeps_copies(self) -> bool:
        """Its destination copies stay when it ends (only a transfer run makes copies)."""
        return False

    def recalled_runs(self) -> list[int]:
        """The runs whose copies it read back (a recall's tape-write runs)."""
        return []

    def list_columns(self) -> dict[str, Any]:
        """What the runs list shows of its parameters: copy mode, concurrency, file count and size."""
        return {"mode": None, "concurrency": None, "file_count": None, "file_size": None}


P = TypeVar("P", bound=RunParameters)


@dataclass
class RunPlan:
    """What run_start creates: the run's parameters and, for a transfer, its files."""

    parameters: dict[str, Any]
    files: list[tuple[str, str, int]]  # source URL, destination URL, size
    site: Site | None
    experiment: Experiment | None
    deadline_seconds: float


@dataclass
class RunLink:
    """A run's link as the runs list gives it: by site name, and by URL."""

    names: str
    urls: str


class SiteNaming(Protocol):
    """runs.selectors.SiteNames: the site names behind URLs and network hosts."""

    def of_url(self, url: str) -> str: ...
    def of_host(self, host: str, port: Any = None) -> str: ...


def joined(values: list[str]) -> str:
    return ", ".join(dict.fromkeys(values))  # each once, in order


class ProbeKind(Generic[P]):
    """One kind of run: the ActivityKinds it serves, its parameters (a frozen dataclass), how the plan completes
    them, what it runs, the grants it asks storage for, its table, its results and figures. The measuring itself
    (`probe`) takes the parameters, a probe context and the grants, and touches no database: it is what a site's
    agent runs too; the portal's tasks record what it gives (runs.probes.runs)."""

    name: ClassVar[str]
    serves: ClassVar[tuple[str, ...]]
    Parameters: type[P]
    given: ClassVar[frozenset[str]]  # the names a start request may give (besides experiment and max_duration)
    per_file: ClassVar[bool] = False  # the transfer engine: one task per file; else one task runs the whole probe
    columns: ClassVar[tuple[str, ...]] = ()  # its table in a challenge's probe tables (none: no table)
    compared: ClassVar[str] = ""  # the column a challenge's comparison with an earlier one sets side by side

    def parameters(self, run: Run) -> P:
        """The run's parameters, typed (read leniently: see RunParameters.stored)."""
        return self.Parameters.stored(run.parameters)

    def plan(
        self,
        *,
        kind: str,
        activity: Activity | None,
        given: dict[str, Any],
        problems: Problems,
        experiment: Experiment | None,
    ) -> RunPlan:
        """The checked parameters of a run (completed from the activity's plan where not given), its files and
        the site whose worker runs it; problems added by field."""
        raise NotImplementedError

    def grants(self, run: Run) -> Grants:
        """Every grant the run's steps will ask storage for (least privilege per URL)."""
        return []

    def probe(self, parameters: P, context: ProbeContext, grants: Grants, cancelled: threading.Event) -> ProbeResult:
        """Run the whole probe (a one-task kind): measure/ called with the typed parameters."""
        raise NotImplementedError(f"{self.name} runs are not one probe")

    def run_probe(self, run: Run, context: ProbeContext, cancelled: threading.Event) -> ProbeResult:
        """runs.tasks' entry: the probe of this run, with its parameters and grants."""
        return self.probe(self.parameters(run), context, self.grants(run), cancelled)

    def counted(self, run: Run, outcome: FileOutcome) -> FileOutcome:
        """A file's outcome as its record counts it (the portal's side of recording what the probe gave)."""
        return outcome

    def measurement_store(self, run: Run, *, experiment_id: int | None, summary: dict[str, Any]) -> None:
        """Store what the probe measured besides its records (the portal's side; nothing by default)."""

    def rows(self, run: Run, summary: dict[str, Any], *, match: Any) -> list[dict[str, Any]]:
        """Its rows in a challenge's probe table (its own columns; the table adds run, activity, time, target).
        `match`: how a URL finds its site (sites.matching.site_matcher)."""
        return []

    def results(self, run: Run, summary: dict[str, Any]) -> dict[str, Any] | None:
        """What the run page shows of the probe's summary (None: nothing)."""
        return None

    def figures(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        """The run page's Plotly figures (as JSON) of `results`."""
        return []

    def describe(self, parameters: P) -> tuple[str, float | None] | None:
        """A running probe's task in words and how long it should take (None: the probe decides)."""
        return None

    def phase(self, *, elapsed: float | None, expected: float | None) -> str:
        """What a running probe does now."""
        return "running"

    def target(self, parameters: P) -> str:
        """What its table's row measured (a host, an endpoint, a cache, a tape directory)."""
        return parameters.site or ""

    def link(self, parameters: P, sites: SiteNaming) -> RunLink:
        """Its link by site name and by URL, for the runs list."""
        return RunLink(parameters.site or "", "")
