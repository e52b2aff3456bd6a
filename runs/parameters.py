"""What a run is asked to do: its parameters checked for type and range, completed from the plan (an activity's
sites, endpoints and the files its challenge's tape writes left), and turned into a plan of files (`run_plan`).
Each kind's plan is its own (runs.kinds); every problem is collected and raised at once as a ValidationError by
field, and then nothing is created."""

from __future__ import annotations

from typing import Any

from challenges.models import Activity
from sites.models import Experiment

from .kinds.base import RunPlan
from .kinds.endpoints import HTTP_SCHEMES, ROOT_SCHEMES
from .kinds.fields import Problems, integer
from .kinds.registry import kind_for, kinds
from .kinds.transfer import CHECKSUMS, DEFAULT_TIMEOUT, TRANSFER_MODES, copy_timeouts

__all__ = [
    "CHECKSUMS",
    "COMMON_PARAMETERS",
    "DEFAULT_TIMEOUT",
    "HTTP_SCHEMES",
    "KIND_PARAMETERS",
    "ROOT_SCHEMES",
    "TRANSFER_KINDS",
    "TRANSFER_MODES",
    "RunPlan",
    "copy_timeouts_default",
    "run_plan",
]

COMMON_PARAMETERS = {"experiment", "max_duration"}
# The names a start request may give, by ActivityKind (each kind's `given`).
KIND_PARAMETERS: dict[str, set[str]] = {served: set(kind.given) for kind in kinds() for served in kind.serves}
# The kinds the per-file engine runs (the transfer kind: transfers and tape writes).
TRANSFER_KINDS = tuple(served for kind in kinds() if kind.per_file for served in kind.serves)


def copy_timeouts_default(*, largest: int, concurrency: int) -> dict[str, int]:
    """The `timeout`, `stall_timeout` and `first_byte_timeout` a run of C files of this size gets by default (for a
    caller that copies without a run, such as bench/probes.py's bare side, bounded the same way)."""
    return copy_timeouts(Problems(), {}, largest=largest, concurrency=concurrency)


def run_plan(kind: str, activity: Activity | None, parameters: dict[str, Any]) -> RunPlan:
    """The checked parameters and files of a run of `kind` (of an activity, or ad hoc); ValidationError by field."""
    given = parameters  # what the request gave (a run's stored parameters are read through runs.kinds)
    problems = Problems()
    probe_kind = kind_for(kind)
    allowed = (set(probe_kind.given) if probe_kind else set()) | COMMON_PARAMETERS
    for name in sorted(set(given) - allowed):
        problems.add("parameters", f"unknown parameter {name!r} for a {kind} run (known: {', '.join(sorted(allowed))})")
    # The experiment first: it decides which endpoints the plan may pick (those that serve it).
    experiment = activity.experiment if activity else None
    if "experiment" in given:
        experiment = Experiment.objects.filter(name__iexact=str(given["experiment"])).first()
        if experiment is None:
            problems.add("experiment", f"no experiment named {given['experiment']!r}")
    if probe_kind is None:
        problems.add("kind", f"runs of kind {kind} are not supported yet")
        plan = RunPlan(parameters={}, files=[], site=None, experiment=experiment, deadline_seconds=3600.0)
    else:
        plan = probe_kind.plan(kind=kind, activity=activity, given=given, problems=problems, experiment=experiment)
    if "max_duration" in given:
        seconds = integer(problems, given, "max_duration", None, low=1, high=30 * 86400)
        plan.deadline_seconds = float(seconds or plan.deadline_seconds)
    problems.raise_any()
    return plan
