"""Celery tasks of sweeps: thin wrappers around sweeps.services (they run on the default queue: the orchestration
is the portal's; each step's run goes to its source site's queue)."""

from __future__ import annotations

from celery import shared_task

from . import services

# One sweep's step: its run's plan (a free-space look at each destination, gfal2 with its own time-outs) and its
# rows; seconds. Beat's tick (every 15 s) does that for each sweep under way, a few at once.
ADVANCE_SOFT_LIMIT, ADVANCE_LIMIT = 120, 180
TICK_SOFT_LIMIT, TICK_LIMIT = 120, 180


@shared_task(
    name=services.ADVANCE_TASK,
    ignore_result=True,
    acks_late=True,
    soft_time_limit=ADVANCE_SOFT_LIMIT,
    time_limit=ADVANCE_LIMIT,
)
def sweep_advance(sweep_id: int) -> None:
    """Start the sweep's next step if its current one is over."""
    services.sweep_advance(sweep_id)


@shared_task(name="sweeps.sweeps_advance", ignore_result=True, soft_time_limit=TICK_SOFT_LIMIT, time_limit=TICK_LIMIT)
def sweeps_advance() -> int:
    """Beat: advance every sweep under way."""
    return services.sweeps_advance()
