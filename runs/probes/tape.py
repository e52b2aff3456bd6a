"""The Tape Challenge table of a challenge: per experiment and tape site, its tape writes (DT) and its recalls (A-DT)
side by side, each against the target of its activity at that site, as the Tape Challenge '22 reported them.

- DT: a tape-write run's bytes into the tape site over its active window (first file start to last file end).
- A-DT: a recall's tape rate (the files that came from tape, first recall start to last online; files online
  already are not in it), files per hour, time to first file, and the flag when it is faster than the site's drives.
- The site's declared limits beside them: drives x drive rate, and the staging request limit against the largest
  request the recall sent.
A fixed number of queries whatever the number of runs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from challenges.choices import ActivityKind
from challenges.models import Target
from common.times import iso_utc
from results.active_rates import transfers_rates
from results.models import TransferRecord
from sites.matching import site_matcher

from ..kinds.staging import recalled_site, staging_results
from ..models import Run

TAPE_COLUMNS = [
    "experiment",
    "site",
    "mode",
    "run",
    "activity",
    "started_at",
    "target_rate",
    "achieved_rate",
    "achieved_of_target",
    "files",
    "volume",
    "files_from_tape",
    "files_already_online",
    "mounts",
    "mounts_per_hour",
    "time_to_first_file",
    "files_per_hour",
    "largest_request",
    "site_request_limit",
    "drives_rate",
    "faster_than_drives",
]


def _target_rates(runs: list[Run]) -> dict[tuple[int, int, str], float]:
    """(activity, site, direction) -> target rate, for the runs' activities."""
    targets = Target.objects.filter(activity_id__in={run.activity_id for run in runs}, site__isnull=False)
    return {(t.activity_id, t.site_id, t.direction): t.rate for t in targets}  # type: ignore[misc]


def tape_table(runs: Iterable[Run]) -> list[dict[str, Any]]:
    """Rows of these runs (activity and its experiment loaded) that write to or recall from tape, by experiment,
    site, DT before A-DT, then time."""
    runs = [run for run in runs if run.kind in (ActivityKind.TAPE_WRITE, ActivityKind.STAGING) and run.activity_id]
    if not runs:
        return []
    targets = _target_rates(runs)
    match = site_matcher()
    writes = [run for run in runs if run.kind == ActivityKind.TAPE_WRITE]
    moved: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    sites: dict[int, tuple[int, str]] = {}
    for run_id, start, end, size, state, site_id, site_name in (
        TransferRecord.objects.filter(run__in=writes)
        .values_list("run_id", "start", "end", "bytes", "state", "destination_site_id", "destination_site__name")
        .order_by()
    ):
        moved[run_id].append((start, end, size, state))
        if site_id is not None:
            sites[run_id] = (site_id, site_name)
    rows = []
    for run in runs:
        base = {
            "experiment": run.activity.experiment.name,  # type: ignore[union-attr]
            "run": run.pk,
            "activity": run.activity.name,  # type: ignore[union-attr]
            "started_at": iso_utc(run.started_at) if run.started_at else None,
        }
        if run.kind == ActivityKind.TAPE_WRITE:
            rates = transfers_rates(moved.get(run.pk, []))
            site_id, site_name = sites.get(run.pk, (None, None))
            row = base | {
                "site": site_name,
                "mode": "DT",
                "target_rate": targets.get((run.activity_id, site_id, "in")),  # type: ignore[arg-type]
                "achieved_rate": rates.average_rate,
                "files": rates.files_ok,
                "volume": rates.volume,
            }
        else:
            site = recalled_site(run, match)
            capacity = getattr(site, "capacity", None) if site else None
            summary = run.summary if isinstance(run.summary, dict) else {}
            result = staging_results(summary, tape_limit=capacity.tape_rate if capacity else None)
            requests = summary.get("requests") or []
            row = base | {
                "site": site.name if site else None,
                "mode": "A-DT",
                "target_rate": targets.get((run.activity_id, site.pk, "out")) if site else None,  # type: ignore[arg-type]
                "achieved_rate": result["tape_rate"],
                "files": result["staged"],
                "volume": None,
                "files_from_tape": result["files_from_tape"],
                "files_already_online": result["files_already_online"],
                "mounts": result["mounts"],
                "mounts_per_hour": (
                    result["mounts"] * 3600 / summary["seconds"]
                    if result["mounts"] is not None and summary.get("seconds")
                    else None
                ),
                "time_to_first_file": result["time_to_first_file"],
                "files_per_hour": result["files_per_hour"],
                "largest_request": max((int(r.get("files", 0)) for r in requests if isinstance(r, dict)), default=None),
                "site_request_limit": capacity.staging_request_limit if capacity else None,
                "drives_rate": capacity.tape_rate if capacity else None,
                "faster_than_drives": result["faster_than_drives"],
            }
        target, achieved = row.get("target_rate"), row.get("achieved_rate")
        row["achieved_of_target"] = achieved / target if target and achieved is not None else None
        rows.append({column: row.get(column) for column in TAPE_COLUMNS})
    mode_order = {"DT": 0, "A-DT": 1}
    return sorted(
        rows, key=lambda r: (r["experiment"], r["site"] or "", mode_order[r["mode"]], r["started_at"] or "", r["run"])
    )
