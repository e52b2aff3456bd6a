"""Reads of runs: a run's live progress (the contract the API and the run page use) and the active runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.db.models import Count, Max, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.utils import timezone

from results.choices import RecordState
from results.models import TransferRecord
from sites.matching import site_matcher
from sites.models import NetworkHost

from .choices import RUN_ENDED, FileState, RunState
from .estimates import FileSnapshot, TransferEstimate, transfer_estimate
from .kinds.registry import kind_for, per_file
from .kinds.transfer import TRANSFER
from .models import Run, RunFile

RATE_WINDOW = 60.0  # seconds: the aggregate rate of run_progress


@dataclass
class ProbeProgress:
    """A one-task run (staging, network, cache, io) while it works: what it does, for how long so far, how long it
    should take when that is known (a network probe's iperf3 duration and its tracepath), and the worker's beat."""

    what: str
    phase: str
    elapsed_seconds: float | None
    expected_seconds: float | None
    heartbeat_seconds: float | None  # since the worker last beat for it


def _probe_what(run: Run) -> tuple[str, float | None]:
    """A probe's task in words (a sentence; iperf3 keeps its lower case), and how long it should take (None: the
    probe decides, as a recall does): its kind's description."""
    kind = kind_for(run.kind)
    described = kind.describe(kind.parameters(run)) if kind is not None else None
    return described or (run.get_kind_display(), None)


def probe_progress(run: Run, *, now: datetime) -> ProbeProgress:
    """Where a one-task run stands: its rows have no files to count until it ends (its records are its files)."""
    what, expected = _probe_what(run)
    end = run.finished_at or now
    elapsed = (end - run.started_at).total_seconds() if run.started_at else None
    phase = "waiting for a worker" if run.state == RunState.QUEUED else ""
    if run.state == RunState.RUNNING:
        phase = "running"
        kind = kind_for(run.kind)
        phase = kind.phase(elapsed=elapsed, expected=expected) if kind is not None else phase
    beat = (now - run.heartbeat).total_seconds() if run.heartbeat and run.state == RunState.RUNNING else None
    return ProbeProgress(
        what=what, phase=phase, elapsed_seconds=elapsed, expected_seconds=expected, heartbeat_seconds=beat
    )


@dataclass
class RunProgress:
    """A run's live figures. rate: bytes/s over the last 60 s (files done and copies in flight); eta_seconds None
    when unknown; probe: a one-task run's own progress (None for transfer runs)."""

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
    bytes_in_flight_estimated: int  # with what the copies that report nothing must have copied (runs.estimates)
    rate: float | None
    eta_seconds: float | None
    started_at: datetime | None
    finished_at: datetime | None
    probe: ProbeProgress | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("started_at", "finished_at"):
            data[name] = data[name].isoformat() if data[name] else None
        return data


def _file_counts(run: Run) -> dict[str, Any]:
    counts = RunFile.objects.filter(run=run).aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(state=FileState.DONE)),
        failed=Count("id", filter=Q(state=FileState.FAILED)),
        cancelled=Count("id", filter=Q(state=FileState.CANCELLED)),
        running=Count("id", filter=Q(state=FileState.RUNNING)),
        dispatched=Count("id", filter=Q(state=FileState.QUEUED) & ~Q(task_id="")),
        queued=Count("id", filter=Q(state=FileState.QUEUED)),
        bytes_done=Sum("bytes", filter=Q(state=FileState.DONE)),
        queued_bytes=Sum("size", filter=Q(state=FileState.QUEUED)),
        first_start=Min("start"),
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
        counts.update(running=0, dispatched=0, queued=0)
    return counts


def _transfer_estimate_of(run: Run, counts: dict[str, Any], *, now: datetime) -> TransferEstimate:
    """runs.estimates over the run's rows: its files done in the last minute and its copies in flight."""
    floor = now - timedelta(seconds=RATE_WINDOW)
    rows = RunFile.objects.filter(
        Q(state=FileState.DONE, end__gt=floor) | Q(state=FileState.RUNNING), run=run
    ).values_list("state", "start", "end", "bytes", "size", "progress_bytes", "progress_at")
    # The window opens when the first copy started: the run's preparation (its test file) moves nothing.
    began = counts["first_start"] or run.started_at
    estimate = transfer_estimate(
        files=[FileSnapshot(*row) for row in rows],
        now=now,
        window_start=max(floor, began) if began else None,
        queued=counts["queued"],
        queued_bytes=counts["queued_bytes"] or 0,
        slots=TRANSFER.parameters(run).concurrency or 0,
    )
    if run.state in RUN_ENDED:
        return TransferEstimate(estimate.rate, estimate.bytes_reported, estimate.bytes_estimated, None)
    return estimate


def run_progress(run: Run, *, now: datetime | None = None) -> RunProgress:
    """Counts of the run's files by state, bytes moved, the aggregate rate over the last minute and an ETA; for a
    one-task run, its own progress."""
    now = now or timezone.now()
    counts = _file_counts(run)
    probe = None
    if per_file(run.kind):
        estimate = _transfer_estimate_of(run, counts, now=now)
    else:
        probe = probe_progress(run, now=now)
        eta = None
        if run.state == RunState.RUNNING and probe.expected_seconds and probe.elapsed_seconds is not None:
            eta = max(probe.expected_seconds - probe.elapsed_seconds, 0.0)
        estimate = TransferEstimate(None, 0, 0, eta)
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
        bytes_in_flight=estimate.bytes_reported,
        bytes_in_flight_estimated=estimate.bytes_estimated,
        rate=estimate.rate,
        eta_seconds=estimate.eta_seconds,
        started_at=run.started_at,
        finished_at=run.finished_at,
        probe=probe,
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


class SiteNames:
    """The site names behind storage URLs and network hosts, from the registry read once (two queries for a whole
    list of runs); a URL or host no site registers is named by its host."""

    def __init__(self) -> None:
        self._site = site_matcher()
        self._hosts = dict(NetworkHost.objects.values_list("address", "site__name"))

    def of_url(self, url: str) -> str:
        site = self._site(url)
        return site.name if site is not None else (urlsplit(url).hostname or url)

    def of_host(self, host: str, port: Any = None) -> str:
        return self._hosts.get(f"{host}:{port}") or self._hosts.get(host) or host


def runs_active() -> QuerySet[Run]:
    return Run.objects.filter(state__in=[RunState.QUEUED, RunState.RUNNING])


def runs_visible_to(*, user: Any) -> QuerySet[Run]:
    """The runs a user may read (the access policy, Run.objects.restrict): all, or for a DDM service those of its
    experiment's activities."""
    return Run.objects.restrict(user).select_related(
        "activity__challenge", "activity__experiment", "created_by", "agent__site"
    )


def activity_window_warning(*, activity: Any, now: datetime) -> str:
    """What a coordinator must know before running an activity outside its window: its records will count for none
    of its targets (the results table only counts what lies inside the window). "" inside the window."""
    if now < activity.start:
        return (
            f"This activity's window opens at {activity.start:%Y-%m-%d %H:%M} UTC: a run now counts for none of its "
            "targets (the results table will say so). Run it anyway to try the setup."
        )
    if now >= activity.end:
        return (
            f"This activity's window closed at {activity.end:%Y-%m-%d %H:%M} UTC: a run now counts for none of its "
            "targets (the results table will say so)."
        )
    return ""
