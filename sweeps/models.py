"""A sweep: every link of a set of sites (or the links given) in every mode and concurrency asked for, plus iperf3
and the path MTU per link, run one step at a time; each step is an ordinary run (runs.Run) with its own page,
rates and clean-up."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from sites.roles import ActivityExperimentQuerySet

from .choices import StepKind, StepState, SweepState


class Sweep(models.Model):
    name = models.CharField(max_length=200)
    activity = models.ForeignKey(
        "challenges.Activity",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="sweeps",
        help_text="the activity its runs count for; none: ad hoc",
    )
    state = models.CharField(max_length=10, choices=SweepState.choices, default=SweepState.QUEUED)
    parameters = models.JSONField(default=dict, help_text="what it was asked: sites or links, modes, concurrency...")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    message = models.TextField(blank=True, help_text="why it ended as it did")

    # A DDM service reads its experiment's activities' sweeps (ad hoc sweeps are no experiment's plan).
    objects = ActivityExperimentQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"sweep {self.pk} {self.name} ({self.state})"


class SweepStep(models.Model):
    """One link in one mode at one concurrency (a transfer run), or one link's iperf3 and path MTU (a network
    run), from the link's source: `queue` is where its run went (`agent.<SOURCE>` when that site has an agent,
    `site.<SOURCE>` when it runs a worker, else the default queue: measured from the portal)."""

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=StepKind.choices)
    source = models.ForeignKey("sites.Site", on_delete=models.PROTECT, related_name="+")
    destination = models.ForeignKey("sites.Site", on_delete=models.PROTECT, related_name="+")
    mode = models.CharField(max_length=10, blank=True)
    concurrency = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=12, choices=StepState.choices, default=StepState.PENDING)
    run = models.OneToOneField("runs.Run", on_delete=models.SET_NULL, null=True, blank=True, related_name="sweep_step")
    queue = models.CharField(max_length=80, blank=True, help_text="the Celery queue its run went to")
    message = models.TextField(blank=True, help_text="why it could not start")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["sweep_id", "index"]
        constraints = [models.UniqueConstraint(fields=["sweep", "index"], name="sweepstep_unique_index")]
        indexes = [models.Index(fields=["sweep", "state", "index"], name="sweepstep_sweep_state")]

    def __str__(self) -> str:
        what = f"{self.mode} C={self.concurrency}" if self.kind == StepKind.TRANSFER else "network"
        return f"step {self.index} of sweep {self.sweep_id}: {self.source} -> {self.destination} {what}"

    @property
    def measured_from(self) -> str:
        """Where its client ran: the source site's agent (`agent.<SITE>`) or own worker, or the portal's default
        queue."""
        for prefix in ("agent.", "site."):
            if self.queue.startswith(prefix):
                return self.queue.removeprefix(prefix)
        return "portal"
