"""The FROM x TO matrix of a challenge: for each source and destination site, the achieved average rate, volume,
files ok / failed and failure ratio, optionally for one mode (pull, push, streamed ...) and one concurrency
(10, 40, 100 files in flight), or split by them. Read from the hourly rollup (and the per-minute one for partial
hours at the ends), never the raw records.

Definitions (as on the page):
- the window is the challenge's [start, end) in whole minutes of the rollup (from the minute of start);
- volume = bytes of successful transfers moved inside the window (each spread over its real [start, end));
- average rate = volume / (end - start), in bytes per second;
- files ok / failed: transfers that ended inside the window; failure ratio = failed / (ok + failed).
Transfers whose source or destination site is unknown are not in the matrix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go
from django.db.models import Q, Sum

from challenges.models import Challenge
from common.units import rate_text, size_text
from sites.models import Site

from .models import RateRollup, RateRollupHour, RollupVersion
from .rates import results_cache_get, results_cache_set
from .rollups import HOUR, hour_floor, minute_floor

SPLITS = ("mode", "concurrency")


@dataclass
class MatrixCell:
    """What moved from one site to another (for one mode and concurrency when the matrix is split by them)."""

    source: str
    destination: str
    seconds: float
    mode: str | None = None  # None: all modes together
    concurrency: int | None = None  # None: all concurrencies together (or the records carry none)
    volume: float = 0.0
    files_ok: int = 0
    files_failed: int = 0

    @property
    def average_rate(self) -> float:
        return self.volume / self.seconds if self.seconds > 0 else 0.0

    @property
    def failure_ratio(self) -> float | None:
        total = self.files_ok + self.files_failed
        return self.files_failed / total if total else None

    def as_row(self) -> dict[str, Any]:
        """The export's row: SI base units (bytes, bytes per second)."""
        return {
            "source": self.source,
            "destination": self.destination,
            "mode": self.mode,
            "concurrency": self.concurrency,
            "average_rate": self.average_rate,
            "volume": self.volume,
            "files_ok": self.files_ok,
            "files_failed": self.files_failed,
            "failure_ratio": self.failure_ratio,
        }


@dataclass
class Matrix:
    """The cells of a challenge's matrix for one selection, and what the selector may offer."""

    challenge: Challenge
    seconds: float
    sites: list[str]  # rows and columns: every site that sends or receives, both ways
    cells: list[MatrixCell]
    modes: list[str] = field(default_factory=list)  # the modes the records carry in the window
    concurrencies: list[int] = field(default_factory=list)
    mode: str | None = None
    concurrency: int | None = None
    split: tuple[str, ...] = ()

    def grid(self) -> list[tuple[str, list[MatrixCell | None]]]:
        """Rows of source sites, each with one cell (or None) per destination site (unsplit matrices only)."""
        by_link = {(cell.source, cell.destination): cell for cell in self.cells}
        return [(source, [by_link.get((source, destination)) for destination in self.sites]) for source in self.sites]

    @property
    def max_rate(self) -> float:
        return max((cell.average_rate for cell in self.cells), default=0.0)


MATRIX_CACHE_PREFIX = "results:matrix:v2:"


def _rollup_groups(*, challenge: Challenge, experiment_ids: Collection[int] | None) -> list[dict[str, Any]]:
    """The rollup of the challenge's window grouped by link, mode and concurrency: cached under the rollup versions
    of the experiments it reads (all of them, with records of no experiment, when experiment_ids is None), so a
    write to any of them gives another key; computed when any of them was never written through a writer."""
    versions = RollupVersion.objects.order_by("experiment_id")
    if experiment_ids is not None:
        experiment_ids = sorted(set(experiment_ids))
        versions = versions.filter(experiment_id__in=experiment_ids)
    current = list(versions.values_list("experiment_id", "version", "changed_at"))
    key = None
    if current:
        parts = (challenge.start.isoformat(), challenge.end.isoformat(), experiment_ids, repr(current))
        key = MATRIX_CACHE_PREFIX + hashlib.sha256(repr(parts).encode()).hexdigest()
        cached = results_cache_get([key])
        if key in cached:
            groups: list[dict[str, Any]] = cached[key]
            return groups
    groups = _rollup_sums(challenge=challenge, experiment_ids=experiment_ids)
    if key is not None:
        results_cache_set({key: groups})  # as long as the rates (RATES_CACHE_SECONDS)
    return groups


_GROUP = ("source_site_id", "destination_site_id", "mode", "concurrency")


def _rollup_sums(*, challenge: Challenge, experiment_ids: Collection[int] | None) -> list[dict[str, Any]]:
    """The rollup of the challenge's window in whole minutes, summed by link, mode and concurrency: its whole hours
    from RateRollupHour, the minutes of a partial first or last hour from RateRollup (one query, a UNION ALL)."""
    first, last = minute_floor(challenge.start), challenge.end
    whole_from = hour_floor(first) if first == hour_floor(first) else hour_floor(first) + HOUR
    whole_to = max(hour_floor(last), whole_from)
    parts = []
    for model, time_filter in (
        (RateRollupHour, Q(hour__gte=whole_from, hour__lt=whole_to)),
        (RateRollup, Q(minute__gte=first, minute__lt=min(whole_from, last)) | Q(minute__gte=whole_to, minute__lt=last)),
    ):
        rollup = model.objects.filter(time_filter, source_site_id__isnull=False, destination_site_id__isnull=False)
        if experiment_ids is not None:
            rollup = rollup.filter(experiment_id__in=experiment_ids)
        parts.append(
            rollup.values(*_GROUP)
            .annotate(volume=Sum("bytes"), ok=Sum("files_ok"), failed=Sum("files_failed"))
            .order_by()
        )
    sums: dict[tuple[Any, ...], dict[str, Any]] = {}
    for group in parts[0].union(parts[1], all=True):
        key = tuple(group[name] for name in _GROUP)
        found = sums.get(key)
        if found is None:
            sums[key] = group
        else:
            for name in ("volume", "ok", "failed"):
                found[name] = (found[name] or 0) + (group[name] or 0)
    return list(sums.values())


def matrix_for_challenge(
    *,
    challenge: Challenge,
    experiment_ids: Collection[int] | None = None,
    mode: str | None = None,
    concurrency: int | None = None,
    split: Sequence[str] = (),
) -> Matrix:
    """The matrix of a challenge (of these experiments only, e.g. those the reader may see; None for all, with the
    records of no experiment), for one mode and / or concurrency or all of them,
    with cells split by `split` (any of "mode", "concurrency"). One query for the rollup versions, one on the rollups
    grouped by link, mode and concurrency (a few hundred groups at most; skipped when cached for these versions),
    then selected and summed here; plus one for the site names."""
    unknown = set(split) - set(SPLITS)
    if unknown:
        raise ValueError(f"cannot split by {', '.join(sorted(unknown))}: only by {', '.join(SPLITS)}")
    groups = _rollup_groups(challenge=challenge, experiment_ids=experiment_ids)
    names = dict(
        Site.objects.filter(
            pk__in={g["source_site_id"] for g in groups} | {g["destination_site_id"] for g in groups}
        ).values_list("id", "name")
    )
    seconds = (challenge.end - challenge.start).total_seconds()
    cells: dict[tuple[Any, ...], MatrixCell] = {}
    for group in groups:
        if (mode is not None and group["mode"] != mode) or (
            concurrency is not None and group["concurrency"] != concurrency
        ):
            continue
        cell_mode = group["mode"] if "mode" in split else mode
        cell_concurrency = group["concurrency"] if "concurrency" in split else concurrency
        source, destination = names[group["source_site_id"]], names[group["destination_site_id"]]
        key = (source, destination, cell_mode, cell_concurrency)
        cell = cells.get(key)
        if cell is None:
            cell = cells[key] = MatrixCell(
                source=source,
                destination=destination,
                seconds=seconds,
                mode=cell_mode,
                concurrency=cell_concurrency,
            )
        cell.volume += group["volume"] or 0.0
        cell.files_ok += group["ok"] or 0
        cell.files_failed += group["failed"] or 0
    sites = sorted({name for cell in cells.values() for name in (cell.source, cell.destination)}, key=str.lower)
    return Matrix(
        challenge=challenge,
        seconds=seconds,
        sites=sites,
        cells=sorted(
            cells.values(),
            key=lambda c: (c.source.lower(), c.destination.lower(), c.mode or "", c.concurrency or 0),
        ),
        modes=sorted({g["mode"] for g in groups if g["mode"]}),
        concurrencies=sorted({g["concurrency"] for g in groups if g["concurrency"] is not None}),
        mode=mode,
        concurrency=concurrency,
        split=tuple(split),
    )


def matrix_heatmap_figure(*, matrix: Matrix) -> dict[str, Any]:
    """The matrix as a heat map: rows source sites (top to bottom as in the table), columns destination sites,
    colour the average rate in GB/s, hover text with volume, files and failure ratio."""
    grid = matrix.grid()
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for _, row in grid:
        z.append([None if cell is None else cell.average_rate / 1e9 for cell in row])
        text.append(
            [
                ""
                if cell is None
                else (
                    f"{rate_text(cell.average_rate)}<br>{size_text(cell.volume)}, "
                    f"{cell.files_ok} ok / {cell.files_failed} failed"
                    + ("" if cell.failure_ratio is None else f" ({cell.failure_ratio:.1%})")
                )
                for cell in row
            ]
        )
    figure = go.Figure(
        go.Heatmap(
            z=z,
            x=matrix.sites,
            y=[source for source, _ in grid],
            text=text,
            hovertemplate="%{y} → %{x}<br>%{text}<extra></extra>",
            colorscale="Blues",
            colorbar={"title": {"text": "GB/s"}},
            zmin=0,
            hoverongaps=False,
        )
    )
    figure.update_layout(
        height=max(300, 120 + 32 * len(matrix.sites)),
        margin={"l": 10, "r": 10, "t": 20, "b": 40},
        xaxis={"title": {"text": "to (destination)"}, "side": "top", "automargin": True},
        yaxis={"title": {"text": "from (source)"}, "autorange": "reversed", "automargin": True},
        plot_bgcolor="#fff",
    )
    result: dict[str, Any] = json.loads(figure.to_json())
    return result
