"""The FROM x TO matrix of a set of portal runs, over the time each link was active.

For one run or a few (a sweep's steps, a DT and its recall), the records are few enough to read: each cell (source
site, destination site, and mode and concurrency when split) gets
- volume: the bytes of its successful transfers;
- active_seconds: the length of the union of its transfers' [start, end) intervals (ok and failed: a link busy
  failing is busy), so that a link that ran for 10 s shows its rate over those 10 s, not over a challenge's week;
- rate = volume / active_seconds; sum_of_file_rates = each successful file's bytes over its own duration, added
  up (the way the JUNO challenge reported "adding up single-file rates");
- files ok / failed, failure ratio, the number of runs, and the most common error.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from .choices import RecordState
from .models import TransferRecord

SPLITS = ("mode", "concurrency")


@dataclass
class LinkCell:
    source: str
    destination: str
    mode: str | None = None
    concurrency: int | None = None
    volume: int = 0
    active_seconds: float = 0.0
    sum_of_file_rates: float = 0.0
    files_ok: int = 0
    files_failed: int = 0
    runs: set[int] = field(default_factory=set)
    top_error: str = ""

    @property
    def rate(self) -> float | None:
        return self.volume / self.active_seconds if self.active_seconds > 0 else None

    @property
    def failure_ratio(self) -> float | None:
        total = self.files_ok + self.files_failed
        return self.files_failed / total if total else None

    def as_row(self) -> dict[str, Any]:
        """SI base units: bytes, seconds, bytes per second."""
        return {
            "source": self.source,
            "destination": self.destination,
            "mode": self.mode,
            "concurrency": self.concurrency,
            "rate": self.rate,
            "sum_of_file_rates": self.sum_of_file_rates,
            "volume": self.volume,
            "active_seconds": self.active_seconds,
            "files_ok": self.files_ok,
            "files_failed": self.files_failed,
            "failure_ratio": self.failure_ratio,
            "runs": sorted(self.runs),
            "top_error": self.top_error,
        }


MATRIX_COLUMNS = list(LinkCell(source="", destination="").as_row())


def union_seconds(intervals: Iterable[tuple[datetime, datetime]]) -> float:
    """The length of the union of [start, end) intervals, in seconds."""
    total = 0.0
    current: tuple[datetime, datetime] | None = None
    for start, end in sorted(intervals):
        if current is None or start > current[1]:
            if current is not None:
                total += (current[1] - current[0]).total_seconds()
            current = (start, end)
        elif end > current[1]:
            current = (current[0], end)
    if current is not None:
        total += (current[1] - current[0]).total_seconds()
    return total


def link_matrix(records: QuerySet[TransferRecord], *, split: Sequence[str] = ()) -> list[LinkCell]:
    """The cells of these records (e.g. `TransferRecord.objects.filter(run__in=runs)`), by link and the `split`
    fields; records whose source or destination site is unknown are left out."""
    unknown = set(split) - set(SPLITS)
    if unknown:
        raise ValueError(f"split by {', '.join(SPLITS)}, not {', '.join(sorted(unknown))}")
    rows = (
        records.filter(source_site__isnull=False, destination_site__isnull=False)
        .values_list(
            "source_site__name",
            "destination_site__name",
            "mode",
            "concurrency",
            "start",
            "end",
            "bytes",
            "state",
            "error_message",
            "run_id",
        )
        .order_by()
    )
    cells: dict[tuple[Any, ...], LinkCell] = {}
    intervals: dict[tuple[Any, ...], list[tuple[datetime, datetime]]] = defaultdict(list)
    errors: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    for source, destination, mode, concurrency, start, end, size, state, error, run_id in rows:
        key = (source, destination, mode if "mode" in split else None, concurrency if "concurrency" in split else None)
        cell = cells.get(key)
        if cell is None:
            cell = cells[key] = LinkCell(source, destination, key[2], key[3])
        if run_id is not None:
            cell.runs.add(run_id)
        if state == RecordState.OK:
            cell.files_ok += 1
            cell.volume += size
            seconds = (end - start).total_seconds()
            if seconds > 0:
                cell.sum_of_file_rates += size / seconds
        elif state == RecordState.FAILED:
            cell.files_failed += 1
            if error:
                errors[key][error[:300]] += 1
        else:
            continue
        intervals[key].append((start, max(end, start)))
    for key, cell in cells.items():
        cell.active_seconds = union_seconds(intervals[key])
        if errors[key]:
            cell.top_error = errors[key].most_common(1)[0][0]
    return sorted(cells.values(), key=lambda c: (c.source, c.destination, c.mode or "", c.concurrency or 0))
