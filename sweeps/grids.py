"""A sweep's rows laid out as the FROM x TO tables of the JUNO challenge's slides: functional per mode, throughput
per mode and concurrency, iperf3 (Gb/s) with MTU flags; and the comparison of two sweeps link by link."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .tables import short_error

FUNCTIONAL_COLUMNS = ["source", "destination", "mode", "concurrency", "ok", "error", "run", "measured_by"]
COMPARE_COLUMNS = ["source", "destination", "mode", "concurrency", "this_rate", "earlier_rate", "ratio"]
# A step that says whether its link works: its run ended by itself, or it could not start (a cancelled run does not).
ENDED = ("finished", "partly", "failed", "not-started")


@dataclass
class Grid:
    """One FROM x TO table: sources down, destinations across; `cells[(source, destination)]` is a row or None."""

    title: str
    sources: list[str]
    destinations: list[str]
    cells: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    mode: str = ""
    concurrency: int | None = None

    def lines(self) -> list[tuple[str, list[dict[str, Any] | None]]]:
        """(source, [cell per destination]) for the template: None on the diagonal and where nothing was run."""
        return [(s, [self.cells.get((s, d)) for d in self.destinations]) for s in self.sources]


def _ends(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    sources = list(dict.fromkeys(row["source"] for row in rows))
    destinations = list(dict.fromkeys(row["destination"] for row in rows))
    names = sorted(set(sources) | set(destinations))
    return [n for n in names if n in sources], [n for n in names if n in destinations]


def functional_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per link and mode, the outcome of its lowest-concurrency step that ended: OK when every file went through,
    else the error (the most common one, or why the run or step failed)."""
    chosen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["concurrency"] or 0):
        key = (row["source"], row["destination"], row["mode"])
        if key in chosen or row["state"] not in ENDED:
            continue
        ok = bool(row["files_ok"]) and not row["files_failed"] and row["state"] != "not-started"
        error = "" if ok else (row["top_error"] or f"no file went through ({row['state']})")
        chosen[key] = {
            "source": row["source"],
            "destination": row["destination"],
            "mode": row["mode"],
            "concurrency": row["concurrency"],
            "ok": ok,
            "error": error,
            "short_error": short_error(error),
            "run": row["run"],
            "measured_by": row["measured_by"],
        }
    return list(chosen.values())


def functional_grids(rows: list[dict[str, Any]]) -> list[Grid]:
    sources, destinations = _ends(rows)
    grids: dict[str, Grid] = {}
    for mode in dict.fromkeys(row["mode"] for row in rows):
        grids[mode] = Grid(f"Functional test, {mode}", sources, destinations, mode=mode)
    for row in functional_rows(rows):
        grids[row["mode"]].cells[(row["source"], row["destination"])] = row
    return list(grids.values())


def throughput_grids(rows: list[dict[str, Any]]) -> list[Grid]:
    sources, destinations = _ends(rows)
    grids: dict[tuple[str, int], Grid] = {}
    for row in rows:
        key = (row["mode"], row["concurrency"])
        if key not in grids:
            title = f"Throughput, {row['mode']}, {row['concurrency']} files in parallel"
            grids[key] = Grid(title, sources, destinations, mode=row["mode"], concurrency=row["concurrency"])
        grids[key].cells[(row["source"], row["destination"])] = row
    return list(grids.values())


def network_grid(rows: list[dict[str, Any]]) -> Grid | None:
    if not rows:
        return None
    sources, destinations = _ends(rows)
    grid = Grid("iperf3 and path MTU", sources, destinations)
    for row in rows:
        grid.cells[(row["source"], row["destination"])] = row
    return grid


def compare_rows(this: list[dict[str, Any]], earlier: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Link by link (and mode and concurrency), this sweep's aggregate rate against the earlier one's and their
    ratio (this / earlier); links only one of them measured show with the other side empty."""
    before = {(r["source"], r["destination"], r["mode"], r["concurrency"]): r for r in earlier}
    now = {(r["source"], r["destination"], r["mode"], r["concurrency"]): r for r in this}
    rows = []
    for key in sorted(set(now) | set(before), key=lambda k: (k[2], k[3] or 0, k[0], k[1])):
        rate = now[key]["aggregate_rate"] if key in now else None
        old = before[key]["aggregate_rate"] if key in before else None
        rows.append(
            {
                "source": key[0],
                "destination": key[1],
                "mode": key[2],
                "concurrency": key[3],
                "this_rate": rate,
                "earlier_rate": old,
                "ratio": rate / old if rate is not None and old else None,
            }
        )
    return rows


def compare_network_rows(this: list[dict[str, Any]], earlier: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Link by link, iperf3 now against the earlier sweep's (bytes per second) and their ratio."""
    before = {(r["source"], r["destination"]): r for r in earlier}
    now = {(r["source"], r["destination"]): r for r in this}
    rows = []
    for key in sorted(set(now) | set(before)):
        rate = now[key]["iperf3_rate"] if key in now else None
        old = before[key]["iperf3_rate"] if key in before else None
        rows.append(
            {
                "source": key[0],
                "destination": key[1],
                "mode": "iperf3",
                "concurrency": None,
                "this_rate": rate,
                "earlier_rate": old,
                "ratio": rate / old if rate is not None and old else None,
            }
        )
    return rows
