"""Celery tasks of sweeps: thin wrappers around sweeps.services (they run on the default queue: the orchestration
is the portal's; each step's run goes to its source site's queue)."""

from __future__ import annotations

from celery import shared_task

from . import services


@shared_task(name=services.ADVANCE_TASK, ignore_result=True, acks_late=True)
def sweep_advance(sweep_id: int) -> None:
    """Start the sweep's next step if its current one is over."""
    services.sweep_advance(sweep_id)


@shared_task(name="sweeps.sweeps_advance", ignore_result=True)
def sweeps_advance() -> int:
    """Beat: advance every sweep under way."""
    return services.sweeps_advance()
