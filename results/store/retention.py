"""Retiring raw transfer records: whole months (partitions, results.store.partitions) detached and dropped once their
rollups are final. Rates, minute-resolution matrices and the now board read the rollups and keep working; the
records' identities (results_recordkey) stay, so a record of a retired month sent again still counts once; pages
that read raw records say which months were retired, and when.

A month's rollups are final when nothing can change them any more:
- it ended RECORDS_FINAL_AFTER_DAYS ago or more (late FTS and Rucio messages have come in), and
- every challenge whose window overlaps it ended that long ago too (its plan no longer changes, so no
  re-attribution will need the raw records), and
- no re-attribution is running.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from challenges.models import Challenge

from ..models import RetiredMonth
from .attribution import attribution_status
from .partitions import TABLE, month_next, partition_name, partitions_list
from .rollups import RECORDS_LOCK


class RetireRefused(Exception):
    """records_retire changed nothing; the message says why."""


@dataclass(frozen=True)
class Retired:
    month: date
    records: int
    bytes: int


def final_after() -> timedelta:
    return timedelta(days=int(getattr(settings, "RECORDS_FINAL_AFTER_DAYS", 7)))


def month_problems(*, month: date, now: datetime) -> list[str]:
    """Why the rollups of `month` are not final yet (empty: they are)."""
    lower = datetime(month.year, month.month, 1, tzinfo=UTC)
    upper = datetime.combine(month_next(month), datetime.min.time(), tzinfo=UTC)
    grace = final_after()
    problems = []
    if upper + grace > now:
        problems.append(
            f"{month:%Y-%m} ends {upper:%Y-%m-%d}: records may still come in until {upper + grace:%Y-%m-%d}"
        )
    for challenge in Challenge.objects.filter(start__lt=upper, end__gt=lower).order_by("start"):
        if challenge.end + grace > now:
            problems.append(
                f"{month:%Y-%m}: challenge {challenge.slug} ends {challenge.end:%Y-%m-%d}; its plan may still change "
                f"and re-attribute records until {challenge.end + grace:%Y-%m-%d}"
            )
    return problems


def months_to_retire(*, before: date) -> list[date]:
    """The months with a partition that end on or before `before`."""
    return [month for month in partitions_list() if month_next(month) <= before]


def records_retire(*, before: date, now: datetime | None = None) -> list[Retired]:
    """Detach and drop the partitions of every month ending on or before `before` whose rollups are final, all or
    none: one month not final refuses the lot (RetireRefused) and changes nothing."""
    now = now or datetime.now(UTC)
    months = months_to_retire(before=before)
    problems = [problem for month in months for problem in month_problems(month=month, now=now)]
    status = attribution_status()
    if status and status.get("state") == "running":
        problems.append("a re-attribution of records is running: retire when it has finished")
    if problems:
        raise RetireRefused("rollups not final, nothing retired:\n  " + "\n  ".join(problems))
    return _drop(months, now)


@transaction.atomic
def _drop(months: Sequence[date], now: datetime) -> list[Retired]:
    retired = []
    with connection.cursor() as cursor:
        # No batch stored and no re-attribution meanwhile (they take this lock shared / exclusive).
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [RECORDS_LOCK])
        for month in months:
            name = partition_name(month)
            cursor.execute(f"SELECT count(*), pg_total_relation_size(%s::regclass) FROM {name}", [name])
            records, size = cursor.fetchone()
            cursor.execute(f"ALTER TABLE {TABLE} DETACH PARTITION {name}")
            cursor.execute(f"DROP TABLE {name}")
            RetiredMonth.objects.create(month=month, retired_at=now, records=records, bytes=size)
            retired.append(Retired(month=month, records=records, bytes=size))
    return retired


def retired_months(*, start: datetime | None = None, end: datetime | None = None) -> list[RetiredMonth]:
    """The retired months overlapping [start, end) (all when not given), oldest first."""
    months = list(RetiredMonth.objects.all())
    if start is not None and end is not None:
        first, last = date(start.year, start.month, 1), date(end.year, end.month, 1)
        months = [month for month in months if first <= month.month <= last]
    return months


def retired_notice(*, start: datetime, end: datetime) -> str | None:
    """What a page that reads raw records says when some of its window's were retired (None: none were)."""
    months = retired_months(start=start, end=end)
    if not months:
        return None
    listed = ", ".join(f"{m.month:%Y-%m} (retired {m.retired_at:%Y-%m-%d})" for m in months)
    return (
        f"The raw records of {listed} were retired: rates, minute-resolution matrices and the now board still "
        "count them (from the rollups), but this page lists and counts only the records still kept."
    )
