"""The probes of a challenge as tables, one per kind (network, io, cache, staging), for its results and their
exports, and the comparison with an earlier challenge; and the run page's figures of one probe. Every number comes
from the runs' summaries through runs.probes.results (one reading of each probe kind); rates in bytes per second."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from challenges.choices import ActivityKind
from results.charts import one_value_bins
from sites.matching import site_for_url, site_matcher

from ..models import Run
from .results import network_results, staging_results, staging_tape_limit

PROBE_KINDS = ("network", "io", "cache", "staging")

COLUMNS: dict[str, list[str]] = {
    "network": [
        "run",
        "activity",
        "started_at",
        "target",
        "rate",
        "interval_min",
        "interval_average",
        "interval_max",
        "interval_stdev",
        "retransmits",
        "path_mtu",
        "local_mtu",
        "mtu_mismatch",
        "interrupted",
    ],
    "io": ["run", "activity", "started_at", "target", "size", "write_rate", "read_rate"],
    "cache": [
        "run",
        "activity",
        "started_at",
        "target",
        "file",
        "size",
        "direct_rate",
        "empty_cache_rate",
        "filled_cache_rate",
        "speedup",
    ],
    "staging": [
        "run",
        "activity",
        "started_at",
        "target",
        "files",
        "staged",
        "failed",
        "requests",
        "time_to_first_file",
        "files_per_hour",
        "median_queue_seconds",
        "median_stage_seconds",
        "files_from_tape",
        "files_already_online",
        "mounts",
        "tape_rate",
        "tape_limit",
        "faster_than_drives",
    ],
}
# The figure each kind's comparison sets side by side: per target, the mean over the runs.
COMPARED = {"network": "rate", "io": "write_rate", "cache": "filled_cache_rate", "staging": "files_per_hour"}


def _target(run: Run) -> str:
    parameters = run.parameters if isinstance(run.parameters, dict) else {}
    for name in ("host", "endpoint", "cache_url", "site"):
        if parameters.get(name):
            return str(parameters[name])
    urls = parameters.get("urls") or []
    return str(urls[0]).rsplit("/", 1)[0] if urls else ""


def _base(run: Run) -> dict[str, Any]:
    # started_at stays a datetime: the page shows it to the second, the exports as ISO 8601 UTC (common.exports).
    return {
        "run": run.pk,
        "activity": run.activity.name if run.activity_id else None,
        "started_at": run.started_at,
        "target": _target(run),
    }


def _median(values: Iterable[Any]) -> float | None:
    numbers = [float(value) for value in values if isinstance(value, int | float)]
    return statistics.median(numbers) if numbers else None


def _network_rows(run: Run, summary: dict[str, Any]) -> list[dict[str, Any]]:
    result = network_results(summary)
    path, local = result["path_mtu"], result["local_mtu"]
    return [
        _base(run)
        | {
            "rate": result["rate"],
            "interval_min": result["min"],
            "interval_average": result["average"],
            "interval_max": result["max"],
            "interval_stdev": result["stdev"],
            "retransmits": result["retransmits"],
            "path_mtu": path,
            "local_mtu": local,
            "mtu_mismatch": bool(path and local and path != local),
            "interrupted": bool(result["interrupted"]),
        }
    ]


def _io_rows(run: Run, summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _base(run)
        | {"size": summary.get("size"), "write_rate": summary.get("write_rate"), "read_rate": summary.get("read_rate")}
    ]


def _cache_rows(run: Run, summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _base(run)
        | {
            "file": row.get("url"),
            "size": row.get("size"),
            "direct_rate": row.get("direct_rate"),
            "empty_cache_rate": row.get("empty_cache_rate"),
            "filled_cache_rate": row.get("filled_cache_rate"),
            "speedup": row.get("speedup"),
        }
        for row in summary.get("rows") or []
        if isinstance(row, dict)
    ]


def _staging_rows(run: Run, summary: dict[str, Any], *, match: Any = site_for_url) -> list[dict[str, Any]]:
    result = staging_results(summary, tape_limit=staging_tape_limit(run, match))
    return [
        _base(run)
        | {
            "files": len(result["files"]),
            "staged": result["staged"],
            "failed": result["failed"],
            "requests": result["requests"],
            "time_to_first_file": result["time_to_first_file"],
            "files_per_hour": result["files_per_hour"],
            "median_queue_seconds": _median(file["queue_seconds"] for file in result["files"]),
            "median_stage_seconds": _median(file["stage_seconds"] for file in result["files"]),
            **{
                name: result[name]
                for name in (
                    "files_from_tape",
                    "files_already_online",
                    "mounts",
                    "tape_rate",
                    "tape_limit",
                    "faster_than_drives",
                )
            },
        }
    ]


_ROWS = {
    ActivityKind.NETWORK: ("network", _network_rows),
    ActivityKind.IO: ("io", _io_rows),
    ActivityKind.CACHE: ("cache", _cache_rows),
    ActivityKind.STAGING: ("staging", _staging_rows),
}


def probe_tables(runs: Iterable[Run]) -> dict[str, list[dict[str, Any]]]:
    """The rows of each probe kind (keys of PROBE_KINDS) of these runs (activity loaded), oldest first; runs whose
    probe reported nothing have no row."""
    tables: dict[str, list[dict[str, Any]]] = {kind: [] for kind in PROBE_KINDS}
    match = None  # the registry's endpoints, read once when a recall needs its site's drives
    for run in sorted(runs, key=lambda r: (r.started_at or r.created_at, r.pk)):
        found = _ROWS.get(run.kind)  # type: ignore[call-overload]
        summary = run.summary if isinstance(run.summary, dict) else {}
        if found is None or not summary:
            continue
        kind, rows = found
        if kind == "staging":
            match = match or site_matcher()
            tables[kind].extend(_staging_rows(run, summary, match=match))
        else:
            tables[kind].extend(rows(run, summary))
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
    """Per kind and target (host, endpoint, cache): the mean of the kind's figure (COMPARED) over this challenge's
    runs and over the earlier one's, and their ratio."""
    compared: list[ProbeComparison] = []
    for kind, column in COMPARED.items():
        ours, theirs = _means(now[kind], column), _means(earlier[kind], column)
        compared.extend(
            ProbeComparison(kind=kind, figure=column, target=target, now=ours.get(target), earlier=theirs.get(target))
            for target in sorted(set(ours) | set(theirs))
        )
    return compared


# --- the run page's figures --------------------------------------------------------------------------------------


def _figure_json(figure: go.Figure) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(figure.to_json())
    return result


def network_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """iperf3 throughput per interval (Gb/s over time) and the histogram of the intervals that moved data, with the
    min / average / max / standard deviation (as the SC2005 figures showed them)."""
    intervals = result.get("intervals") or []
    if not intervals:
        return []
    seconds = [end for end, _ in intervals]
    gbits = [rate * 8 / 1e9 for _, rate in intervals]
    line = go.Figure(go.Scatter(x=seconds, y=gbits, mode="lines+markers", name="throughput"))
    line.update_layout(
        height=300,
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        title={"text": "iperf3 throughput per interval"},
        xaxis={"title": {"text": "seconds from the start"}},
        yaxis={"title": {"text": "Gb/s"}, "rangemode": "tozero"},
    )
    active = [value for value in gbits if value > 0]
    stats = " · ".join(
        f"{name} {value * 8 / 1e9:.3g} Gb/s"
        for name, value in (("min", result.get("min")), ("avg", result.get("average")), ("max", result.get("max")))
        if value is not None
    )
    if result.get("stdev") is not None:
        stats += f" · stdev {result['stdev'] * 8 / 1e9:.3g} Gb/s"
    one = one_value_bins(active)
    histogram = go.Figure(
        go.Histogram(x=active, nbinsx=None if one else 20, xbins=one.xbins if one else None, name="intervals")
    )
    histogram.update_layout(
        height=300,
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        title={"text": f"Intervals with data ({len(active)}): {stats}"},
        xaxis={"title": {"text": "Gb/s"}, **({"range": one.x_range} if one else {})},
        yaxis={"title": {"text": "intervals"}},
        bargap=0.05,
    )
    return [_figure_json(line), _figure_json(histogram)]


def staging_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per file: the time it waited in the queue and the time it took to come online, stacked."""
    files = [file for file in result.get("files") or [] if file.get("queue_seconds") is not None]
    if not files:
        return []
    names = [str(file.get("url") or "").rsplit("/", 1)[-1] or str(index) for index, file in enumerate(files)]
    figure = go.Figure(
        [
            go.Bar(x=names, y=[file["queue_seconds"] for file in files], name="queue"),
            go.Bar(x=names, y=[file.get("stage_seconds") or 0 for file in files], name="stage"),
        ]
    )
    figure.update_layout(
        barmode="stack",
        height=320,
        margin={"l": 50, "r": 10, "t": 30, "b": 80},
        title={"text": "Per file: queue and stage time"},
        yaxis={"title": {"text": "seconds"}},
    )
    return [_figure_json(figure)]


def io_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Write versus read rate, side by side."""
    if result.get("write_rate") is None and result.get("read_rate") is None:
        return []
    figure = go.Figure(
        go.Bar(x=["write", "read"], y=[(result.get(name) or 0) / 1e9 for name in ("write_rate", "read_rate")])
    )
    figure.update_layout(
        height=280,
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        title={"text": "Write vs read"},
        yaxis={"title": {"text": "GB/s"}},
    )
    return [_figure_json(figure)]


def cache_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per file: the read rate direct, through an empty cache and through a filled one, side by side."""
    rows = [row for row in result.get("rows") or [] if isinstance(row, dict)]
    if not rows:
        return []
    names = [str(row.get("url") or "").rsplit("/", 1)[-1] for row in rows]
    figure = go.Figure(
        [
            go.Bar(x=names, y=[(row.get(column) or 0) / 1e9 for row in rows], name=label)
            for column, label in (
                ("direct_rate", "direct"),
                ("empty_cache_rate", "cache empty"),
                ("filled_cache_rate", "cache filled"),
            )
        ]
    )
    figure.update_layout(
        barmode="group",
        height=320,
        margin={"l": 50, "r": 10, "t": 30, "b": 80},
        title={"text": "Read rate: direct vs through the cache"},
        yaxis={"title": {"text": "GB/s"}},
    )
    return [_figure_json(figure)]


FIGURES = {"network": network_figures, "staging": staging_figures, "io": io_figures, "cache": cache_figures}


def probe_figures(probe: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The Plotly figures (as JSON) of a run page's probe result (runs.probes.results.probe_results)."""
    if not probe:
        return []
    make = FIGURES.get(probe.get("kind", ""))
    return make(probe) if make else []
