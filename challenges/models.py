"""Challenges and the shared clock: activities of experiments in time windows, with target rates."""

from __future__ import annotations

import math

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from sites.models import Experiment, Site

from .choices import ActivityKind, CopyMode, Direction, RunState


class Challenge(models.Model):
    """A data challenge: its time span and the windows its rates are measured over."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    start = models.DateTimeField()
    end = models.DateTimeField()
    description = models.TextField(blank=True)
    compare_with = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="an earlier challenge to compare results with",
    )
    max_window = models.PositiveIntegerField(default=3600, help_text="seconds; the max rate's window")
    stable_window = models.PositiveIntegerField(default=18000, help_text="seconds; the stable rate's window")

    class Meta:
        ordering = ["-start", "slug"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="challenge_end_after_start"),
            models.CheckConstraint(
                condition=Q(max_window__gt=0) & Q(stable_window__gt=0), name="challenge_windows_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Activity(models.Model):
    """A slot on the shared clock: which experiment runs which mode, of which kind, when, with which test
    parameters."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="activities")
    name = models.CharField(max_length=200)
    experiment = models.ForeignKey(Experiment, on_delete=models.PROTECT, related_name="activities")
    mode = models.CharField(max_length=32, help_text="DT, A-DT or free text")
    kind = models.CharField(max_length=16, choices=ActivityKind.choices)
    start = models.DateTimeField()
    end = models.DateTimeField()
    source = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    file_size = models.PositiveBigIntegerField(null=True, blank=True, help_text="bytes")
    file_count = models.PositiveIntegerField(null=True, blank=True)
    concurrency = models.PositiveIntegerField(null=True, blank=True, help_text="files in flight, e.g. 10, 40, 100")
    copy_mode = models.CharField(max_length=8, choices=CopyMode.choices, blank=True)
    auto_run = models.BooleanField(default=False, help_text="start a run when the window opens")

    class Meta:
        ordering = ["start", "experiment__name", "name"]
        verbose_name_plural = "activities"
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="activity_end_after_start"),
            models.UniqueConstraint(fields=["challenge", "name"], name="activity_name_unique_in_challenge"),
        ]

    def __str__(self) -> str:
        return self.name


class Target(models.Model):
    """A target rate of an activity, for a site in one direction or for a link between two sites.

    When it was derived from a nominal rate and factors (nominal 200 MB/s x headroom 1.5 x ...), both are kept
    so that pages can show the derivation.
    """

    activity = models.ForeignKey(Activity, on_delete=models.CASCADE, related_name="targets")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    direction = models.CharField(max_length=3, choices=Direction.choices, blank=True)
    link_from = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    link_to = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    rate = models.FloatField(help_text="bytes per second")
    nominal_rate = models.FloatField(null=True, blank=True, help_text="bytes per second")
    factors = models.JSONField(default=dict, blank=True, help_text='e.g. {"headroom": 1.5, "efficiency": 2}')

    class Meta:
        ordering = ["activity", "site__name", "direction", "link_from__name", "link_to__name"]
        constraints = [
            models.CheckConstraint(condition=Q(rate__gt=0), name="target_rate_positive"),
            models.CheckConstraint(
                condition=(
                    Q(site__isnull=False) & ~Q(direction="") & Q(link_from__isnull=True) & Q(link_to__isnull=True)
                )
                | (Q(site__isnull=True) & Q(direction="") & Q(link_from__isnull=False) & Q(link_to__isnull=False)),
                name="target_site_or_link",
            ),
            models.UniqueConstraint(
                fields=["activity", "site", "direction"],
                condition=Q(site__isnull=False),
                name="target_unique_site_direction",
            ),
            models.UniqueConstraint(
                fields=["activity", "link_from", "link_to"], condition=Q(site__isnull=True), name="target_unique_link"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.activity}: {self.place} {self.rate / 1e9:.3g} GB/s"

    @property
    def is_link(self) -> bool:
        return self.site_id is None

    @property
    def place(self) -> str:
        """ "CNAF in", or "CERN -> BNL" for a link."""
        if self.is_link:
            return f"{self.link_from} -> {self.link_to}"
        return f"{self.site} {self.direction}"

    @property
    def derived_rate(self) -> float | None:
        """nominal x the product of the factors, when a nominal rate was given."""
        if self.nominal_rate is None:
            return None
        return self.nominal_rate * math.prod(float(value) for value in self.factors.values())


class Run(models.Model):
    """One execution of a probe: of an activity (pressed Run, or started by the clock) or ad hoc. A transfer run
    fans out into per-file tasks; every file's outcome is a results.TransferRecord pointing back here."""

    activity = models.ForeignKey(Activity, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
    kind = models.CharField(max_length=16, choices=ActivityKind.choices)
    state = models.CharField(max_length=10, choices=RunState.choices, default=RunState.QUEUED)
    parameters = models.JSONField(default=dict, blank=True, help_text="what the probe was asked to do")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True, help_text="past it, the reaper ends the run as failed")
    message = models.TextField(blank=True, help_text="why the run ended as it did")
    summary = models.JSONField(
        default=dict, blank=True, help_text="what a staging, network, cache or io probe reported as a whole"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state"], condition=Q(state__in=["queued", "running"]), name="run_active")]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.kind}, {self.state})"


class FileState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


# A file in one of these states is finished for good.
FILE_ENDED = (FileState.DONE, FileState.FAILED, FileState.CANCELLED)


class RunFile(models.Model):
    """One file of a transfer run. It is in flight from the moment a task is sent for it (`task_id` set, still
    queued) until it ends; `heartbeat` is refreshed by the worker copying it, so that a file whose worker died is
    found ("worker lost") and retried once or failed."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="files")
    index = models.PositiveIntegerField()
    source_url = models.TextField()
    destination_url = models.TextField()
    size = models.PositiveBigIntegerField(default=0, help_text="bytes")
    queue = models.CharField(max_length=80, default="default", help_text="the Celery queue its task goes to")
    state = models.CharField(max_length=10, choices=FileState.choices, default=FileState.QUEUED)
    attempt = models.PositiveSmallIntegerField(default=0, help_text="the current (or last) try, from 1")
    task_id = models.CharField(max_length=64, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    start = models.DateTimeField(null=True, blank=True)
    end = models.DateTimeField(null=True, blank=True)
    bytes = models.PositiveBigIntegerField(default=0, help_text="bytes moved by the successful try")
    progress_bytes = models.PositiveBigIntegerField(
        default=0, help_text="bytes the try in flight has copied so far (gfal2's progress markers, every few seconds)"
    )
    progress_at = models.DateTimeField(null=True, blank=True, help_text="when progress_bytes was reported")
    mode = models.CharField(max_length=16, blank=True, help_text="what gfal2 really did: pull, push, streamed ...")
    error = models.TextField(blank=True)
    recorded = models.BooleanField(
        default=False, help_text="the try that ended is stored as a transfer record (or there is nothing to store)"
    )

    class Meta:
        ordering = ["run_id", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runfile_unique_index")]
        indexes = [
            models.Index(fields=["run", "state", "index"], name="runfile_run_state"),
            models.Index(fields=["state", "heartbeat"], condition=Q(state="running"), name="runfile_running"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} file {self.index} ({self.state})"

    @property
    def in_flight(self) -> bool:
        return self.state == FileState.RUNNING or (self.state == FileState.QUEUED and bool(self.task_id))
