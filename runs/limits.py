"""How long runs' Celery tasks may run: the soft and hard time limits each message carries, from its run's own
timeouts, and the task's own limits for a message that carries none (docs/operator/workers.md has the table).

They are a backstop behind the run's own clocks, never ahead of them: a copy ends at its gfal2 timeout, a copy
still running 60 s later is taken for hung (runs.reaper), a run ends at its deadline and its probe is then
cancelled. Only a worker of the prefork pool enforces them; the documented `--pool threads` workers rely on those
clocks alone (Celery cannot stop a thread)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.utils import timezone

from .kinds.transfer import DEFAULT_TIMEOUT, TransferParameters, transfer_parameters

# Between soft and hard: what a task does with SoftTimeLimitExceeded (a failed try recorded, a probe's partial
# result stored) takes seconds.
HARD_AFTER_SOFT = 60
# Past a copy's gfal2 timeout: the 60 s after which its worker takes it for hung, the reaper's next visit (every
# 30 s), and the file's finish (its record, the run's next files): the soft limit comes after all of them.
COPY_GRACE = 300
# Past a run's deadline: the reaper's visit that ends the run, the probe cancelled by the watcher, its results kept.
DEADLINE_GRACE = 300
# For a message without limits of its own (sent before messages carried them, or by hand): a copy of a 50 GB file
# at the 5 MB/s floor the default copy timeout assumes (10,000 s), with grace; below the broker's visibility
# timeout (6 h 10 min), past which Redis would deliver the message again anyway.
RUN_TASK_SOFT_LIMIT = 3 * 3600
RUN_TASK_LIMIT = RUN_TASK_SOFT_LIMIT + HARD_AFTER_SOFT
# Deleting an ended run's copies: one gfal2 unlink per file and rmdir per directory, each seconds at most.
COPIES_DELETE_SOFT_LIMIT = 30 * 60
COPIES_DELETE_LIMIT = COPIES_DELETE_SOFT_LIMIT + HARD_AFTER_SOFT
# Beat's ticks every 30 s (the reaper, the clock): a pass over the active runs, each under its row lock.
TICK_SOFT_LIMIT = 60
TICK_LIMIT = TICK_SOFT_LIMIT + 15


def copy_task_limits(parameters: Mapping[str, Any] | TransferParameters) -> tuple[int, int]:
    """(soft, hard) seconds for one try of one file of a run with these parameters (typed, or a run's JSON): its
    copy's timeout and a grace."""
    timeout = transfer_parameters(parameters).timeout or DEFAULT_TIMEOUT
    soft = timeout + COPY_GRACE
    return soft, soft + HARD_AFTER_SOFT


def prepare_task_limits(deadline: datetime | None, *, now: datetime | None = None) -> tuple[int, int]:
    """(soft, hard) seconds for a run's first task (a transfer's test file and first files; a probe's whole work),
    sent now: until the run's deadline and a grace (the task's own limits for a run without a deadline)."""
    if deadline is None:
        return RUN_TASK_SOFT_LIMIT, RUN_TASK_LIMIT
    left = max(0, int((deadline - (now or timezone.now())).total_seconds()))
    soft = left + DEADLINE_GRACE
    return soft, soft + HARD_AFTER_SOFT
