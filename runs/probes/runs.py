"""One-task runs (staging, network, cache, io): begun, kept alive and stored here; the probe itself runs in
runs.tasks.run_probe.

The worker running a probe beats on the run (`Run.heartbeat`, through the watcher) for as long as the probe works,
an iperf3 of an hour or a recall of 10,000 files alike; the reaper ends such a run only when the beat stops (its
worker was lost) or its deadline passes. What the probe measured is stored whatever ended the run: a probe
stopped by a cancel or past its deadline still hands in what it had, and the run keeps the state and reason of
its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from measure.outcomes import FileOutcome
from results.choices import RecordState
from results.services import probe_record_new, records_store

from ..choices import RUN_ENDED, RunState
from ..ends import run_end
from ..engine import run_experiment_id, run_outcome
from ..kinds.registry import kind_for
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
        kind = kind_for(run.kind)
        records = [
            probe_record_new(
                run_id=run.pk,
                activity_id=run.activity_id,
                experiment_id=experiment_id,
                outcome=kind.counted(run, outcome) if kind is not None else outcome,
                state=RecordState.OK if outcome.ok else RecordState.FAILED,
                concurrency=None,
                origin_id=f"run{run.pk}-{run.kind}-{number}",
                attempt=1,
            )
            for number, outcome in enumerate(outcomes)
        ]
        records_store(records=records)
        if kind is not None:
            kind.measurement_store(run, experiment_id=experiment_id, summary=summary)
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
