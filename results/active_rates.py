"""The rates of a set of transfers over the time they were active: a run's (or several runs') own numbers.

Definitions (also on the run page and the "About these numbers" page):
- the active window is [first start, last end) of the successful transfers; active_seconds its length;
- volume = the bytes of the successful transfers; average rate = volume / active_seconds;
- each transfer's bytes are spread uniformly over its real [start, end) into a series of bins (1 s for runs up to
  about 5.5 hours, coarser beyond: at most 20,000 bins);
- max rate = the highest mean rate over any window of `max_window` seconds inside the active window, where
  max_window is a tenth of the active time (at least one bin, at most the challenges' 3,600 s): seconds for a run
  of seconds, an hour for a long one;
- stable rate = the same over `stable_window`, half of the active time (at most the challenges' 18,000 s); given
  only for runs active at least STABLE_MIN_SECONDS, where "sustained" means something;
- files ok and failed: every transfer of the set.
Rates are bytes per second.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from itertools import accumulate
from typing import Any

from django.db.models import QuerySet

from .choices import RecordState
from .models import TransferRecord

MAX_BINS = 20_000
MAX_WINDOW_CAP = 3600.0
STABLE_WINDOW_CAP = 18000.0
STABLE_MIN_SECONDS = 60.0


@dataclass
class ActiveRates:
    """The numbers of a set of transfers over their active window (bytes, seconds, bytes per second)."""

    start: datetime | None = None
    end: datetime | None = None
    active_seconds: float = 0.0
    volume: int = 0
    files_ok: int = 0
    files_failed: int = 0
    average_rate: float | None = None
    max_rate: float | None = None
    max_window: float | None = None
    max_window_start: datetime | None = None
    stable_rate: float | None = None
    stable_window: float | None = None
    stable_window_start: datetime | None = None
    resolution: float | None = None  # seconds a bin of the series

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("start", "end", "max_window_start", "stable_window_start"):
            data[name] = data[name].isoformat().replace("+00:00", "Z") if data[name] else None
        return data


def active_rates(records: QuerySet[TransferRecord]) -> ActiveRates:
    """The numbers of these records (one run's, several runs', a link's ...), in one query."""
    rows = records.values_list("start", "end", "bytes", "state")
    return transfers_rates(rows)


def transfers_rates(rows: Iterable[tuple[datetime, datetime, int, str]]) -> ActiveRates:
    """The numbers of (start, end, bytes, state) transfers; see the module's definitions."""
    result = ActiveRates()
    moved: list[tuple[datetime, datetime, int]] = []
    for start, end, size, state in rows:
        if state == RecordState.OK:
            result.files_ok += 1
            moved.append((start, max(end, start), int(size)))
        elif state == RecordState.FAILED:
            result.files_failed += 1
    if not moved:
        return result
    result.start = min(start for start, _, _ in moved)
    result.end = max(end for _, end, _ in moved)
    result.volume = sum(size for _, _, size in moved)
    result.active_seconds = (result.end - result.start).total_seconds()
    if result.active_seconds <= 0:
        return result  # instantaneous: a volume but no rate
    result.average_rate = result.volume / result.active_seconds
    resolution = max(1.0, math.ceil(result.active_seconds / MAX_BINS))
    series = _series(moved, result.start, resolution, math.ceil(result.active_seconds / resolution))
    through = list(accumulate(series, initial=0.0))
    result.resolution = resolution
    max_bins = _bins(result.active_seconds / 10, resolution, MAX_WINDOW_CAP, len(series))
    result.max_window = max_bins * resolution
    first, best = _best(through, max_bins)
    result.max_rate = best / result.max_window
    result.max_window_start = result.start + timedelta(seconds=first * resolution)
    if result.active_seconds >= STABLE_MIN_SECONDS:
        stable_bins = _bins(result.active_seconds / 2, resolution, STABLE_WINDOW_CAP, len(series))
        result.stable_window = stable_bins * resolution
        first, best = _best(through, stable_bins)
        result.stable_rate = best / result.stable_window
        result.stable_window_start = result.start + timedelta(seconds=first * resolution)
    return result


def _bins(seconds: float, resolution: float, cap: float, available: int) -> int:
    """A window of about `seconds` (at most `cap`) in whole bins: at least one, at most the series."""
    return max(1, min(available, int(min(seconds, cap) // resolution)))


def _series(moved: list[tuple[datetime, datetime, int]], origin: datetime, resolution: float, bins: int) -> list[float]:
    """Bytes per bin: each transfer's bytes spread uniformly over [start, end). A sweep over the changes of the
    total rate, so that the cost is the number of transfers and bins, not their product."""
    changes: dict[float, float] = {}
    instant = [0.0] * bins
    for start, end, size in moved:
        begin = (start - origin).total_seconds()
        finish = (end - origin).total_seconds()
        if finish <= begin:  # no duration: all its bytes in its bin
            instant[min(int(begin // resolution), bins - 1)] += size
            continue
        rate = size / (finish - begin)
        changes[begin] = changes.get(begin, 0.0) + rate
        changes[finish] = changes.get(finish, 0.0) - rate
    series = instant
    rate, moment = 0.0, 0.0
    for at in sorted(changes):
        _spread(series, moment, at, rate, resolution)
        rate += changes[at]
        moment = at
    return series


def _spread(series: list[float], begin: float, end: float, rate: float, resolution: float) -> None:
    """Add a constant rate over [begin, end) seconds to the bins it covers."""
    if rate <= 0 or end <= begin:
        return
    index = int(begin // resolution)
    while begin < end and index < len(series):
        edge = min(end, (index + 1) * resolution)
        series[index] += rate * (edge - begin)
        begin, index = edge, index + 1


def _best(through: list[float], width: int) -> tuple[int, float]:
    """(first bin, bytes) of the window of `width` bins with the most bytes (the earliest of equals)."""
    sums = [through[index + width] - through[index] for index in range(len(through) - width)]
    best = max(sums)
    return sums.index(best), best
