"""The probes of a challenge as tables, one per kind with a table (network, io, cache, staging: runs.kinds), for
its results and their exports, and the comparison with an earlier challenge; and the run page's figures of one
probe. Every number comes from the runs' summaries through their kind's reading; rates in bytes per second."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sites.matching import site_matcher
from sites.models import Site

from ..kinds.base import ProbeKind
from ..kinds.network import network_figures
from ..kinds.registry import kind_for, kind_named, table_kinds
from ..models import Run

__all__ = [
    "BASE_COLUMNS",
    "ProbeComparison",
    "network_figures",
    "probe_activity_kinds",
    "probe_columns",
    "probe_comparison",
    "probe_figures",
    "probe_kinds",
    "probe_tables",
]

BASE_COLUMNS = ["run", "activity", "started_at", "target"]


def probe_kinds() -> list[str]:
    """The kinds with a table (runs.kinds.registry: network, io, cache, staging), in the pages' order."""
    return [kind.name for kind in table_kinds()]


def probe_columns() -> dict[str, list[str]]:
    """Each table's columns: the run, its activity, when it started and what it measured, then the kind's own."""
    return {kind.name: [*BASE_COLUMNS, *kind.columns] for kind in table_kinds()}


def probe_activity_kinds() -> list[str]:
    """The ActivityKinds whose runs have a table."""
    return [served for kind in table_kinds() for served in kind.serves]


class _Matcher:
    """sites.matching.site_matcher, made on the first URL (the registry's endpoints read once, when a recall needs
    its site's drives)."""

    def __init__(self) -> None:
        self._match: Callable[[str], Site | None] | None = None

    def __call__(self, url: str) -> Site | None:
        self._match = self._match or site_matcher()
        return self._match(url)


def _base(run: Run, kind: ProbeKind[Any]) -> dict[str, Any]:
    # started_at stays a datetime: the page shows it to the second, the exports as ISO 8601 UTC (common.exports).
    return {
        "run": run.pk,
        "activity": run.activity.name if run.activity is not None else None,
        "started_at": run.started_at,
        "target": kind.target(kind.parameters(run)),
    }


def probe_tables(runs: Iterable[Run]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each probe kind (keys of probe_kinds()) of these runs (activity loaded), oldest first; runs whose
    probe reported nothing have no row."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in probe_kinds()}
    match = _Matcher()
    for run in sorted(runs, key=lambda r: (r.started_at or r.created_at, r.pk)):
        kind = kind_for(run.kind)
        summary = run.summary if isinstance(run.summary, dict) else {}
        if kind is None or kind.name not in tables or not summary:
            continue
        found = kind.rows(run, summary, match=match)
        tables[kind.name].extend(_base(run, kind) | row for row in found)
    return tables


@dataclass(frozen=True)
class ProbeComparison:
    kind: str
    figure: str  # the column compared
    target: str
    now: float | None
    earlier: float | None

    @property
    def ratio(self) -> float | None:
        return self.now / self.earlier if self.now is not None and self.earlier else None

    def as_row(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "figure": self.figure,
            "target": self.target,
            "now": self.now,
            "earlier": self.earlier,
            "ratio": self.ratio,
        }


def _means(rows: Sequence[dict[str, Any]], column: str) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for row in rows:
        if isinstance(row.get(column), int | float):
            values.setdefault(row["target"], []).append(float(row[column]))
    return {target: statistics.fmean(found) for target, found in values.items()}


def probe_comparison(
    now: dict[str, list[dict[str, Any]]], earlier: dict[str, list[dict[str, Any]]]
) -> list[ProbeComparison]:
    """Per kind and target (host, endpoint, cache): the mean of the kind's figure (its `compared`) over this challenge's
    runs and over the earlier one's, and their ratio."""
    compared: list[ProbeComparison] = []
    for kind, column in ((kind.name, kind.compared) for kind in table_kinds() if kind.compared):
        ours, theirs = _means(now.get(kind, []), column), _means(earlier.get(kind, []), column)
        compared.extend(
            ProbeComparison(kind=kind, figure=column, target=target, now=ours.get(target), earlier=theirs.get(target))
            for target in sorted(set(ours) | set(theirs))
        )
    return compared


def probe_figures(probe: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The Plotly figures (as JSON) of a run page's probe result (runs.probes.results.probe_results): its kind's."""
    if not probe:
        return []
    kind = kind_named(str(probe.get("kind", "")))
    return kind.figures(probe) if kind is not None else []
