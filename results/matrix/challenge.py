"""The FROM x TO matrix of a challenge: for each source and destination site, the achieved rate over the time the
link was active, volume, files ok / failed, failure ratio, runs and the most common error, optionally for one mode
(pull, push, streamed ...) and one concurrency (10, 40, 100 files in flight), or split by them.

Definitions (as on the page):
- the transfers are those that count for the challenge's activities (results.store.attribution), whole;
- volume = bytes of the successful ones;
- active time = the union of the transfers' [start, end) intervals (ok and failed: a link busy failing is busy),
  so a link that ran for 10 s in a week shows its rate over those 10 s;
- average rate = volume / active time, in bytes per second; sum of file rates = each successful file's bytes over
  its own duration, added up (how the JUNO challenge reported "adding up single-file rates");
- files ok / failed; failure ratio = failed / (ok + failed).
Transfers whose source or destination site is unknown are not in the matrix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import plotly.graph_objects as go

from challenges.models import Activity, Challenge
from common.db import read_alias
from common.units import rate_text, size_text

from ..models import RollupVersion, TransferRecord
from ..targets.rates import results_cache_get, results_cache_set
from .cells import SPLITS, LinkCell, link_matrix
from .minutes import matrix_exact_limit, rollup_cells, rollup_offered
from .unions import union_cells, union_offered, union_transfers

MatrixCell = LinkCell


@dataclass
class Matrix:
    """The cells of a challenge's matrix for one selection, and what the selector may offer."""

    challenge: Challenge
    sites: list[str]  # rows and columns: every site that sends or receives, both ways
    cells: list[LinkCell]
    modes: list[str] = field(default_factory=list)  # the modes the challenge's records carry
    concurrencies: list[int] = field(default_factory=list)
    mode: str | None = None
    concurrency: int | None = None
    split: tuple[str, ...] = ()
    transfers: int = 0  # files that ended, of the challenge's activities (the hourly rollup's count)
    # "unions": exact, from the stored unions (results.store.link_intervals); "records": exact, from the records;
    # "minute": active time counted to the minute from the per-minute rollup
    resolution: str = "unions"

    def grid(self, cells: Sequence[LinkCell] | None = None) -> list[tuple[str, list[LinkCell | None]]]:
        """Rows of source sites, each with one cell (or None) per destination site, of these cells (one group of a
        split matrix) or of all (an unsplit matrix)."""
        by_link = {(cell.source, cell.destination): cell for cell in (self.cells if cells is None else cells)}
        return [(source, [by_link.get((source, destination)) for destination in self.sites]) for source in self.sites]

    def groups(self) -> list[tuple[str | None, int | None, list[LinkCell]]]:
        """The cells by (mode, concurrency): one group for an unsplit matrix."""
        found: dict[tuple[str | None, int | None], list[LinkCell]] = {}
        for cell in self.cells:
            found.setdefault((cell.mode, cell.concurrency), []).append(cell)
        return [(mode, concurrency, cells) for (mode, concurrency), cells in sorted(found.items(), key=_group_order)]

    @property
    def max_rate(self) -> float:
        return max((cell.average_rate for cell in self.cells), default=0.0)


def _group_order(item: tuple[tuple[str | None, int | None], Any]) -> tuple[str, int]:
    (mode, concurrency), _ = item
    return (mode or "", concurrency or 0)


MATRIX_CACHE_PREFIX = "results:matrix:v4:"
RESOLUTIONS = ("unions", "records", "minute")


def challenge_activity_ids(*, challenge: Challenge, experiment_ids: Collection[int] | None) -> list[int]:
    """The challenge's activities (of these experiments; None: all)."""
    activities = Activity.objects.filter(challenge=challenge)
    if experiment_ids is not None:
        activities = activities.filter(experiment_id__in=experiment_ids)
    return sorted(activities.values_list("pk", flat=True))


def matrix_for_challenge(
    *,
    challenge: Challenge,
    experiment_ids: Collection[int] | None = None,
    mode: str | None = None,
    concurrency: int | None = None,
    split: Sequence[str] = (),
    resolution: str | None = None,
) -> Matrix:
    """The matrix of a challenge (of these experiments' activities only, e.g. those the reader may see; None for
    all), for one mode and / or concurrency or all of them, with cells split by `split` (any of "mode",
    "concurrency"). `resolution` None: from the stored unions, or when they do not hold every record (a bulk load
    not rebuilt), from the records up to RESULTS_MATRIX_EXACT_LIMIT transfers and to the minute above; "unions",
    "records" or "minute" ask for one way (to compare them). Cached under the rollup versions of its experiments
    (every writer of records, and every re-attribution, raises them): a query for the activities, one for the
    versions, and when not cached one for the counts, one for the cells and one for the modes and concurrencies on
    offer."""
    unknown = set(split) - set(SPLITS)
    if unknown:
        raise ValueError(f"cannot split by {', '.join(sorted(unknown))}: only by {', '.join(SPLITS)}")
    if resolution not in (None, *RESOLUTIONS):
        raise ValueError(f"resolution is one of {', '.join(RESOLUTIONS)}, not {resolution!r}")
    activity_ids = challenge_activity_ids(challenge=challenge, experiment_ids=experiment_ids)
    versions = list(
        # From the database the cells are read from (common.db), so that a replica's cells never go into the cache
        # under the primary's newer version.
        RollupVersion.objects.using(read_alias())
        .filter(experiment_id__in=Activity.objects.filter(pk__in=activity_ids).values("experiment_id"))
        .order_by("experiment_id")
        .values_list("experiment_id", "version", "changed_at")
    )
    parts = (challenge.pk, activity_ids, mode, concurrency, tuple(split), resolution, repr(versions))
    key = MATRIX_CACHE_PREFIX + hashlib.sha256(repr(parts).encode()).hexdigest()
    cached = results_cache_get([key]).get(key) if versions else None
    if cached is not None:
        cells, modes, concurrencies, transfers, resolution = cached
    else:
        cells, offered, transfers, resolution = _cells_compute(
            activity_ids=activity_ids, mode=mode, concurrency=concurrency, split=split, resolution=resolution
        )
        modes = sorted({m for m, _ in offered if m})
        concurrencies = sorted({c for _, c in offered if c is not None})
        if versions:
            results_cache_set({key: (cells, modes, concurrencies, transfers, resolution)})
    for cell in cells:  # an unsplit cell stands for the selection
        cell.mode = cell.mode if "mode" in split else mode
        cell.concurrency = cell.concurrency if "concurrency" in split else concurrency
    sites = sorted({name for cell in cells for name in (cell.source, cell.destination)}, key=str.lower)
    return Matrix(
        challenge=challenge,
        sites=sites,
        cells=cells,
        modes=modes,
        concurrencies=concurrencies,
        mode=mode,
        concurrency=concurrency,
        split=tuple(split),
        transfers=transfers,
        resolution=resolution,
    )


def _cells_compute(
    *,
    activity_ids: list[int],
    mode: str | None,
    concurrency: int | None,
    split: Sequence[str],
    resolution: str | None,
) -> tuple[list[LinkCell], set[tuple[str, int | None]], int, str]:
    """(cells, modes and concurrencies on offer, transfers, resolution) of these activities, the way `resolution`
    asks (None: the stored unions when they hold every record)."""
    transfers, unions_complete = union_transfers(activity_ids)
    if resolution == "unions" or (resolution is None and unions_complete):
        cells = union_cells(activity_ids=activity_ids, mode=mode, concurrency=concurrency, split=split)
        return cells, union_offered(activity_ids), transfers, "unions"
    if resolution == "minute" or (resolution is None and transfers > matrix_exact_limit()):
        cells = rollup_cells(activity_ids=activity_ids, mode=mode, concurrency=concurrency, split=split)
        return cells, rollup_offered(activity_ids), transfers, "minute"
    records = TransferRecord.objects.filter(activity_id__in=activity_ids)
    selected = records
    if mode is not None:
        selected = selected.filter(mode=mode)
    if concurrency is not None:
        selected = selected.filter(concurrency=concurrency)
    offered = set(
        records.filter(source_site__isnull=False, destination_site__isnull=False)
        .values_list("mode", "concurrency")
        .distinct()
        .order_by()
    )
    return link_matrix(selected, split=split), offered, transfers, "records"


def matrix_heatmap_figure(*, matrix: Matrix) -> dict[str, Any]:
    """The matrix as a heat map: rows source sites (top to bottom as in the table), columns destination sites,
    colour the average rate over the link's active time in GB/s, hover text with volume, active time, files and
    failure ratio. Split matrices: of the first group."""
    groups = matrix.groups()
    grid = matrix.grid(groups[0][2] if groups else [])
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for _, row in grid:
        z.append([None if cell is None else cell.average_rate / 1e9 for cell in row])
        text.append(
            [
                ""
                if cell is None
                else (
                    f"{rate_text(cell.average_rate)} over {cell.active_seconds:.0f} s active<br>"
                    f"{size_text(cell.volume)}, "
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
