"""One-task runs (staging, network, cache, io): begun, kept alive and stored here; the probe itself runs in
runs.tasks.run_probe.

The worker running a probe beats on the run (`Run.heartbeat`, through the watcher) for as long as the probe works,
an iperf3 of an hour or a recall of 10,000 files alike; the reaper ends such a run only when the beat stops (its
worker was lost) or its deadline passes. What the probe measured is stored whatever ended the run: a probe
stopped by a cancel or past its deadline still hands in what it had, and the run keeps the state and reason of
its end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from challenges.choices import ActivityKind
from measure.outcomes import ONLINE_BEFORE, FileOutcome
from results.choices import RecordState
from results.services import network_measurement_store, probe_record_new, records_store

from ..choices import RUN_ENDED, RunState
from ..ends import run_end
from ..engine import run_experiment_id, run_outcome
from ..models import Run


def run_probe_begin(run_id: int) -> Run | None:
    """queued -> running, with a first heartbeat; None when the run is no longer queued (a duplicate message)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.state != RunState.QUEUED:
            return None
        now = timezone.now()
        run.state, run.started_at, run.heartbeat = RunState.RUNNING, now, now
        run.save(update_fields=["state", "started_at", "heartbeat"])
    return run


def runs_heartbeat(run_ids: Sequence[int]) -> None:
    """The workers running these probes are alive (one UPDATE)."""
    if run_ids:
        Run.objects.filter(pk__in=run_ids, state=RunState.RUNNING).update(heartbeat=timezone.now())


def run_probe_store(run_id: int, outcomes: Sequence[FileOutcome], summary: dict[str, Any], error: str = "") -> None:
    """A probe's files as records and its summary on the run. A run still running ends here: failed with the
    probe's error, else by its files (finished, partly, failed), else finished. A run that ended meanwhile
    (cancelled, reaped) keeps its state and reason, and gains what the probe measured."""
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("activity").get(pk=run_id)
        experiment_id = run_experiment_id(run)
        records = [
            probe_record_new(
                run_id=run.pk,
                activity_id=run.activity_id,
                experiment_id=experiment_id,
                outcome=_counted(run, outcome),
                state=RecordState.OK if outcome.ok else RecordState.FAILED,
                concurrency=None,
                origin_id=f"run{run.pk}-{run.kind}-{number}",
                attempt=1,
            )
            for number, outcome in enumerate(outcomes)
        ]
        records_store(records=records)
        _network_measurement(run, experiment_id, summary)
        run.summary = summary
        fields = ["summary"]
        if run.state in RUN_ENDED and (outcomes or summary):
            run.message = f"{run.message} (what the probe measured until then is kept)"
            fields.append("message")
        run.save(update_fields=fields)
        if run.state not in RUN_ENDED:
            state, message = run_outcome(total=len(outcomes), ok=sum(1 for o in outcomes if o.ok))
            if error:
                state, message = RunState.FAILED, error
            run_end(run_id=run.pk, state=state, message=message)


def _network_measurement(run: Run, experiment_id: int | None, summary: dict[str, Any]) -> None:
    """A network run's throughput as its activity's network figure (results.targets), over the run's own span."""
    rate = summary.get("rate")
    if run.kind != ActivityKind.NETWORK or not isinstance(rate, int | float) or rate < 0:
        return
    now = timezone.now()
    network_measurement_store(
        run_id=run.pk,
        activity_id=run.activity_id,
        experiment_id=experiment_id,
        host=str(summary.get("host") or ""),
        port=summary.get("port") if isinstance(summary.get("port"), int) else None,
        rate=float(rate),
        start=run.started_at or now,
        end=now,
    )


def _counted(run: Run, outcome: FileOutcome) -> FileOutcome:
    """The outcome as its record counts it: a recall's file that was online already was not brought online by the
    recall, so it counts no bytes for the A-DT targets (it stays a staged file on the run page and in the Tape
    Challenge table's "online already")."""
    if run.kind == ActivityKind.STAGING and outcome.details.get("locality_before") in ONLINE_BEFORE:
        return dataclasses.replace(outcome, bytes=0)
    return outcome
