"""Runs of the portal's own tests: one Run per execution of a probe, one RunFile per file of a transfer run."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from challenges.choices import ActivityKind
from sites.roles import ActivityExperimentQuerySet

from .choices import CopiesState, FileState, JobKind, JobState, RunState


class Run(models.Model):
    """One execution of a probe: of an activity (pressed Run, or started by the clock) or ad hoc. A transfer run
    fans out into per-file tasks; every file's outcome is a results.TransferRecord pointing back here."""

    activity = models.ForeignKey(
        "challenges.Activity", on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
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
    heartbeat = models.DateTimeField(
        null=True,
        blank=True,
        help_text="a one-task probe's worker beats here while it works; the reaper's sign of life",
    )
    copies = models.CharField(
        max_length=16, choices=CopiesState.choices, blank=True, default=CopiesState.NONE, help_text="its copies"
    )
    copies_message = models.TextField(blank=True, help_text="what the clean-up did, or why it could not")
    summary = models.JSONField(
        default=dict, blank=True, help_text="what a staging, network, cache or io probe reported as a whole"
    )
    directory = models.CharField(
        max_length=64,
        blank=True,
        help_text="the directory its copies go to under portal-runs/ (run-ID-RANDOM: no other database, nor this "
        "one restored from a backup, can make the same name)",
    )
    credential = models.CharField(
        max_length=8,
        blank=True,
        help_text="what its workers presented to storage: token, x509 or none (empty until it starts)",
    )
    credential_detail = models.JSONField(
        default=dict,
        blank=True,
        help_text="the credential's source and, for tokens, the audience and scopes asked per grant (never a token)",
    )
    agent = models.ForeignKey(
        "sites.SiteAgent",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="runs",
        help_text="the site's agent that ran it; empty for the portal's own workers",
    )

    # A DDM service reads its experiment's activities' runs (ad hoc runs are no experiment's plan).
    objects = ActivityExperimentQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state"], condition=Q(state__in=["queued", "running"]), name="run_active")]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.kind}, {self.state})"


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
    written = models.JSONField(
        default=list,
        blank=True,
        help_text="the destination names its tries may have written (the clean-up deletes these and nothing else): "
        "a name is added when a try starts copying to it, and taken back when the copy was refused because the "
        "name already existed (someone else's file)",
    )
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


class AgentJob(models.Model):
    """One message for a site's agent (runs.dispatch sends it here instead of to a Celery queue when the site has
    an agent): the agent takes it by long poll (runs.agents), beats while it works and reports its result once. A
    result delivered twice is stored once: the job is done after the first. The runs' own rows (files' tries,
    heartbeats, ends) stay the engine's, so the reaper treats an agent's work as a worker's."""

    site = models.ForeignKey("sites.Site", on_delete=models.CASCADE, related_name="agent_jobs")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="agent_jobs")
    file = models.ForeignKey(RunFile, on_delete=models.CASCADE, null=True, blank=True, related_name="agent_jobs")
    kind = models.CharField(max_length=16, choices=JobKind.choices)
    attempt = models.PositiveSmallIntegerField(default=0, help_text="the file's try, or the job's offer (from 1)")
    task_id = models.CharField(max_length=64, blank=True, help_text="a file's try's task id (runs.engine)")
    state = models.CharField(max_length=8, choices=JobState.choices, default=JobState.QUEUED)
    agent = models.ForeignKey("sites.SiteAgent", on_delete=models.SET_NULL, null=True, blank=True, related_name="jobs")
    created = models.DateTimeField(auto_now_add=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True, help_text="the agent's last beat for it")
    reported_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True, help_text="what the agent reported (kept as it came)")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "kind", "file", "attempt"], name="agentjob_unique", nulls_distinct=False
            ),
        ]
        indexes = [models.Index(fields=["site", "id"], condition=Q(state="queued"), name="agentjob_queued")]

    def __str__(self) -> str:
        return f"agent job {self.pk} ({self.kind} of run {self.run_id}, {self.state})"
