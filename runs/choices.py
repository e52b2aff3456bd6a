"""States of runs and of their files."""

from django.db import models


class RunState(models.TextChoices):
    """What happened, in the same words on every page, export and API: finished (every file ok), partly (some
    failed), failed (none ok, or ended by the reaper or its deadline), cancelled (by a person or the clock)."""

    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    FINISHED = "finished", "finished"
    PARTLY = "partly", "finished with failures"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


# A run in one of these states does no more work.
RUN_ENDED = (RunState.FINISHED, RunState.PARTLY, RunState.FAILED, RunState.CANCELLED)


class CopiesState(models.TextChoices):
    """What became of the copies a transfer run wrote to its destinations (a probe run writes none that stay)."""

    NONE = "", "none"
    PRESENT = "present", "on the destinations (run in progress)"
    KEPT = "kept", "kept (keep_copies)"
    DELETING = "deleting", "being deleted"
    DELETED = "deleted", "deleted"
    FAILED = "delete-failed", "could not all be deleted"


class FileState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


# A file in one of these states is finished for good.
FILE_ENDED = (FileState.DONE, FileState.FAILED, FileState.CANCELLED)


class JobKind(models.TextChoices):
    """What a site's agent is asked to do (runs.AgentJob): the messages a site's Celery worker would have taken."""

    PREPARE = "prepare", "prepare a transfer run (its credential and test file)"
    TRANSFER = "transfer", "one try of one file"
    PROBE = "probe", "a one-task probe (staging, network, cache, io)"
    COPIES_DELETE = "copies-delete", "delete an ended run's copies"


class JobState(models.TextChoices):
    QUEUED = "queued", "waiting for the agent"
    CLAIMED = "claimed", "taken by the agent"
    DONE = "done", "reported"
    STALE = "stale", "superseded before the agent took it"
