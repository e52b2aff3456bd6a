"""The monthly partitions of results_transferrecord (PostgreSQL declarative partitioning by range of "end").

Every month a record may end in gets its partition ahead of time (beat: `results.partitions_ensure`, the current
month and PARTITIONS_AHEAD after it) or on demand, before a batch that needs one is stored (`partitions_for_ends`).
No insert ever fails for want of a partition: a record whose month has none (ends far in the past or the future,
outside PARTITIONS_ON_DEMAND_MONTHS of now, or stored inside a caller's transaction, where no DDL is run) goes to
the DEFAULT partition, and the month's partition, when it is made later, takes its rows out of the default.
Months retired by `manage.py records_retire` (results.store.retention) are never made again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime
from typing import Any

from django.db import connection, transaction

TABLE = "results_transferrecord"
DEFAULT_PARTITION = f"{TABLE}_default"
PARTITIONS_AHEAD = 3  # months after the current one that beat keeps made
PARTITIONS_ON_DEMAND_MONTHS = 36  # a batch makes the partitions of months this close to now; farther: DEFAULT
_NAME = re.compile(rf"^{TABLE}_y(\d{{4}})m(\d{{2}})$")

# The months this process need not look at again: they have a partition, or were retired, or lie outside the
# on-demand window (their records go to the DEFAULT partition). A batch of a month not in it looks again.
_known: set[date] = set()


def month_start(moment: datetime | date) -> date:
    return date(moment.year, moment.month, 1)


def month_next(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def month_add(month: date, months: int) -> date:
    index = month.year * 12 + month.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def partition_name(month: date) -> str:
    return f"{TABLE}_y{month.year:04d}m{month.month:02d}"


def partitions_list() -> list[date]:
    """The months that have a partition, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass",
            [TABLE],
        )
        names = [row[0] for row in cursor.fetchall()]
    months = []
    for name in names:
        match = _NAME.match(name)
        if match:
            months.append(date(int(match[1]), int(match[2]), 1))
    _known.update(months)
    return sorted(months)


def _retired(month: date) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM results_retiredmonth WHERE month = %s", [month])
        return cursor.fetchone() is not None


@transaction.atomic
def partition_ensure(*, month: date) -> bool:
    """Make the partition of `month` (its first day) unless it exists or the month was retired; rows of that month
    already in the DEFAULT partition move into it. Returns whether it was made. Takes the table's ACCESS EXCLUSIVE
    lock for as long as that takes (nothing when the default holds none of the month)."""
    month = month_start(month)
    if month in partitions_list() or _retired(month):
        return False
    lower = datetime(month.year, month.month, 1, tzinfo=UTC)
    upper = datetime.combine(month_next(month), datetime.min.time(), tzinfo=UTC)
    name = partition_name(month)
    with connection.cursor() as cursor:
        # The parent first, as every insert locks it, then its partitions: no deadlock with a batch being stored.
        cursor.execute(f"LOCK TABLE {TABLE} IN ACCESS EXCLUSIVE MODE")
        cursor.execute("SELECT to_regclass(%s)", [name])
        if cursor.fetchone()[0] is not None:
            return False
        cursor.execute("DROP TABLE IF EXISTS pg_temp.partition_moving")
        cursor.execute(
            f"CREATE TEMP TABLE partition_moving ON COMMIT DROP AS WITH moved AS (DELETE FROM {DEFAULT_PARTITION} "
            f'WHERE "end" >= %s AND "end" < %s RETURNING *) SELECT * FROM moved',
            [lower, upper],
        )
        cursor.execute(f"CREATE TABLE {name} PARTITION OF {TABLE} FOR VALUES FROM (%s) TO (%s)", [lower, upper])
        cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM partition_moving")
    transaction.on_commit(lambda: _known.add(month))
    return True


def partitions_ensure(*, now: datetime | None = None, ahead: int = PARTITIONS_AHEAD) -> list[date]:
    """Beat's task: the partitions of the current month and `ahead` after it, and of every month of which the
    DEFAULT partition holds rows (those that came before their month was made). Returns the months made."""
    now = now or datetime.now(UTC)
    wanted = {month_add(month_start(now), offset) for offset in range(ahead + 1)}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT date_trunc('month', \"end\" AT TIME ZONE 'UTC')::date FROM {DEFAULT_PARTITION}"
        )
        stray = {row[0] for row in cursor.fetchall()}
    window = _on_demand_window(now)
    wanted |= {month for month in stray if window[0] <= month <= window[1]}
    return [month for month in sorted(wanted) if partition_ensure(month=month)]


def _on_demand_window(now: datetime) -> tuple[date, date]:
    current = month_start(now)
    return month_add(current, -PARTITIONS_ON_DEMAND_MONTHS), month_add(current, PARTITIONS_AHEAD)


def partitions_for_ends(ends: Iterable[datetime], *, now: datetime | None = None) -> None:
    """Before a batch is stored outside any transaction: make the partitions its records' months lack, when those
    months are near now (others go to the DEFAULT partition). Costs a set lookup per distinct month when they
    exist (a batch whose ends span years costs a look at each month between)."""
    ends = list(ends)
    if not ends:
        return
    # The months from the first to the last end (min and max cost a fraction of a millisecond a batch).
    month, last = month_start(min(ends).astimezone(UTC)), month_start(max(ends).astimezone(UTC))
    months = set()
    while month <= last:
        months.add(month)
        month = month_next(month)
    missing = months - _known
    if not missing:
        return
    partitions_list()
    missing -= _known
    if not missing or connection.in_atomic_block:
        return
    low, high = _on_demand_window(now or datetime.now(UTC))
    for month in sorted(missing):
        if low <= month <= high:
            partition_ensure(month=month)
        _known.add(month)  # made, retired, or left to the DEFAULT partition


def months_retired(cursor: Any) -> str | None:
    """The months whose raw records were retired (results.store.retention), as "2026-01, 2026-02", or None: what a
    rebuild from the records (rollups, the matrix's unions) would lose. None before the table exists (migrations
    that rebuild run before it)."""
    cursor.execute("SELECT to_regclass('results_retiredmonth')")
    if cursor.fetchone()[0] is None:
        return None
    cursor.execute("SELECT string_agg(to_char(month, 'YYYY-MM'), ', ' ORDER BY month) FROM results_retiredmonth")
    retired = cursor.fetchone()[0]
    return str(retired) if retired else None
