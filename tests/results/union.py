"""The Python reference of a link's active time (results.active_time defines it in SQL): the tests compare the SQL
with it."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime


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
