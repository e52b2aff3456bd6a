"""Reads of runs: a run's live progress (the contract the API and the run page use) and the active runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.utils import timezone

from results.choices import RecordState
from results.models import TransferRecord

from .choices import RUN_ENDED, FileState, RunState
from .models import Run, RunFile

RATE_WINDOW = 60.0  # seconds: the aggregate rate of run_progress


@dataclass
class RunProgress:
    """A run's live figures. rate: bytes/s over the last 60 s (of the files that ended); eta_seconds None when
    unknown."""

    state: str
    state_label: str  # the words pages show: "finished with failures" for partly
    message: str
    files_total: int
    files_done: int
    files_failed: int
    files_cancelled: int
    in_flight: int
    queued: int
    bytes_done: int
    bytes_in_flight: int  # copied so far by the copies in flight, as their workers last reported
    rate: float | None
    eta_seconds: float | None
    started_at: datetime | None
    finished_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("started_at", "finished_at"):
            data[name] = data[name].isoformat() if data[name] else None
        return data


def run_progress(run: Run) -> RunProgress:
    """Counts of the run's files by state, bytes moved, the aggregate rate over the last minute and an ETA."""
    now = timezone.now()
    counts = RunFile.objects.filter(run=run).aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(state=FileState.DONE)),
        failed=Count("id", filter=Q(state=FileState.FAILED)),
        cancelled=Count("id", filter=Q(state=FileState.CANCELLED)),
        running=Count("id", filter=Q(state=FileState.RUNNING)),
        dispatched=Count("id", filter=Q(state=FileState.QUEUED) & ~Q(task_id="")),
        queued=Count("id", filter=Q(state=FileState.QUEUED)),
        bytes_done=Sum("bytes", filter=Q(state=FileState.DONE)),
        size_left=Sum("size", filter=Q(state__in=[FileState.QUEUED, FileState.RUNNING])),
    )
    if counts["total"] == 0:  # a run of one probe: its records are its files
        record_counts = TransferRecord.objects.filter(run=run).aggregate(
            total=Count("id"),
            done=Count("id", filter=Q(state=RecordState.OK)),
            failed=Count("id", filter=Q(state=RecordState.FAILED)),
            cancelled=Count("id", filter=Q(state=RecordState.CANCELLED)),
            bytes_done=Sum("bytes", filter=Q(state=RecordState.OK)),
        )
        counts.update(record_counts)
        counts.update(running=0, dispatched=0, queued=0, size_left=0)
    window_start = now - timedelta(seconds=RATE_WINDOW)
    if run.started_at:
        window_start = max(window_start, run.started_at)
    window = (now - window_start).total_seconds()
    rate: float | None = None
    in_flight_bytes = 0
    if window > 0 and run.started_at:
        # Each file's bytes spread over its real [start, end); a copy in flight counts what gfal2 last reported it
        # had copied, spread over [start, reported at), so that large files show a rate before the first one ends.
        spans = []
        recent = RunFile.objects.filter(
            Q(state=FileState.DONE, end__gt=window_start)
            | Q(state=FileState.RUNNING, progress_bytes__gt=0, progress_at__isnull=False),
            run=run,
        )
        for state, start, end, size, at, done in recent.values_list(
            "state", "start", "end", "bytes", "progress_at", "progress_bytes"
        ):
            if state == FileState.DONE:
                spans.append((start, end, size))
            else:
                in_flight_bytes += done
                if at is not None and at > window_start:
                    spans.append((start, at, done))
        moved = 0.0
        for start, end, size in spans:
            if start is None or end is None:
                continue
            seconds = (end - start).total_seconds()
            moved += size if seconds <= 0 else size * (end - max(start, window_start)).total_seconds() / seconds
        rate = moved / window
    left = max((counts["size_left"] or 0) - in_flight_bytes, 0)
    eta = left / rate if rate and left and run.state not in RUN_ENDED else None
    return RunProgress(
        state=run.state,
        state_label=RunState(run.state).label,
        message=run.message,
        files_total=counts["total"],
        files_done=counts["done"],
        files_failed=counts["failed"],
        files_cancelled=counts["cancelled"],
        in_flight=counts["running"] + counts["dispatched"],
        queued=counts["queued"] - counts["dispatched"],
        bytes_done=counts["bytes_done"] or 0,
        bytes_in_flight=in_flight_bytes,
        rate=rate,
        eta_seconds=eta,
        started_at=run.started_at,
        finished_at=run.finished_at,
    )


def runs_with_figures(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Runs with what their records say, for lists: `volume` (bytes of the successful transfers), `first_start` and
    `last_end` (their active window) and `records_failed`, each a subquery on the run's records (no row
    multiplication, one query for the page)."""
    records = TransferRecord.objects.filter(run=OuterRef("pk")).order_by().values("run")
    ok = records.filter(state=RecordState.OK)
    return runs.annotate(
        volume=Subquery(ok.annotate(total=Sum("bytes")).values("total")[:1]),
        first_start=Subquery(ok.annotate(first=Min("start")).values("first")[:1]),
        last_end=Subquery(ok.annotate(last=Max("end")).values("last")[:1]),
        records_failed=Subquery(
            records.filter(state=RecordState.FAILED).annotate(failed=Count("id")).values("failed")[:1]
        ),
    )


def run_figures(run: Run) -> dict[str, Any]:
    """The list's figures of a run annotated by runs_with_figures: bytes, the average rate over its active window
    (first start to last end of its successful transfers), its duration (created to finished, or so far)."""
    volume = getattr(run, "volume", None) or 0
    first, last = getattr(run, "first_start", None), getattr(run, "last_end", None)
    active = (last - first).total_seconds() if first and last else 0.0
    began = run.started_at or run.created_at
    duration = ((run.finished_at or timezone.now()) - began).total_seconds() if began else None
    return {
        "volume": volume,
        "average_rate": volume / active if active > 0 else None,
        "active_seconds": active,
        "files_failed": getattr(run, "records_failed", None) or 0,
        "duration": duration,
    }


def runs_active() -> QuerySet[Run]:
    return Run.objects.filter(state__in=[RunState.QUEUED, RunState.RUNNING])
