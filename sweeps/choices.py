"""States of sweeps and of their steps."""

from django.db import models


class SweepState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"
    CANCELLED = "cancelled", "cancelled"
    FAILED = "failed", "failed"


SWEEP_ENDED = (SweepState.FINISHED, SweepState.CANCELLED, SweepState.FAILED)
SWEEP_UNDER_WAY = (SweepState.QUEUED, SweepState.RUNNING)


class StepState(models.TextChoices):
    """A step waits (pending), has its run going (running), is over (ended: its run says how it went), was
    cancelled with its sweep before it ran, or could not start (its run was refused: the reason is its message)."""

    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    ENDED = "ended", "ended"
    CANCELLED = "cancelled", "cancelled"
    NOT_STARTED = "not-started", "could not start"


class StepKind(models.TextChoices):
    TRANSFER = "transfer", "transfer"
    NETWORK = "network", "network (iperf3 and path MTU)"


MODES = ("pull", "push", "streamed")
PROTOCOLS = ("davs", "root")
