"""Every kind of run the portal can run, in one place: adding a kind is writing its module (a ProbeKind: its
parameters, plan, probe, grants, table, results) and naming it here. Everything that differs by kind (runs.tasks,
runs.parameters, runs.credentials, runs.selectors, runs.probes.tables and results, the run pages) asks this
registry, never the kind's name."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .base import ProbeKind, RunParameters
from .cache import CACHE
from .io import IO
from .network import NETWORK
from .staging import STAGING
from .transfer import TRANSFER

if TYPE_CHECKING:
    from ..models import Run

# In the order the pages list them (a challenge's probe tables: network, io, cache, staging).
KINDS: list[ProbeKind[Any]] = [TRANSFER, NETWORK, IO, CACHE, STAGING]


def kinds() -> list[ProbeKind[Any]]:
    """Every registered kind."""
    return list(KINDS)


def kind_for(activity_kind: str) -> ProbeKind[Any] | None:
    """The kind that runs activities (and runs) of this ActivityKind; None for one the portal cannot run."""
    return next((kind for kind in KINDS if activity_kind in kind.serves), None)


def kind_named(name: str) -> ProbeKind[Any] | None:
    """The kind of this name (a probe result's "kind")."""
    return next((kind for kind in KINDS if kind.name == name), None)


def per_file(activity_kind: str) -> bool:
    """Whether runs of this ActivityKind are the per-file engine's (else one task runs the whole probe)."""
    kind = kind_for(activity_kind)
    return kind is not None and kind.per_file


def runnable_kinds() -> list[str]:
    """Every ActivityKind the portal can run."""
    return [served for kind in KINDS for served in kind.serves]


def table_kinds() -> list[ProbeKind[Any]]:
    """The kinds with a table in a challenge's probe tables (the one-task probes)."""
    return [kind for kind in KINDS if kind.columns]


def run_parameters(run: Run) -> RunParameters:
    """A run's parameters, typed by its kind (the common ones only for a kind no module serves)."""
    kind = kind_for(run.kind)
    return kind.parameters(run) if kind is not None else RunParameters.stored(run.parameters)


@contextmanager
def kind_registered(kind: ProbeKind[Any]) -> Iterator[ProbeKind[Any]]:
    """Register a kind for the block's length (a test's kind; a real one is named in KINDS)."""
    KINDS.append(kind)
    try:
        yield kind
    finally:
        KINDS.remove(kind)
