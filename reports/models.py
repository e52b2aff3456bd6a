"""Site reports: what a site's admins saw during a challenge (rates, outages, problems, actions, free text), and the
coordinators' review of it. Rates are bytes per second, times UTC."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from challenges.models import Challenge, Target
from sites.models import Experiment, Site
from sites.roles import ExperimentRestrictedQuerySet

from .choices import CommentKind, ProblemCategory, RateDirection, ReportStatus
from .rendering import markdown_render

# Free text is bounded, and rendered once when it is saved (notes_html, text_html), never on a read.
NOTES_LENGTH = 20_000  # characters
TEXT_LENGTH = 5_000


def _rendered_on_save(instance: models.Model, source: str, target: str, kwargs: dict[str, Any]) -> None:
    """Render the Markdown of `source` into `target` when the save writes `source`."""
    fields = kwargs.get("update_fields")
    if fields is not None and source not in fields:
        return
    setattr(instance, target, str(markdown_render(getattr(instance, source) or "")))
    if fields is not None:
        kwargs["update_fields"] = {*fields, target}


class ProblemFields(models.Model):
    """What a problem holds, in a site's report or an experiment's: its category and the ticket that tracks it."""

    category = models.CharField(max_length=20, choices=ProblemCategory.choices)
    ticket = models.CharField(max_length=300, blank=True, help_text="GGUS ticket number or URL")
    description = models.TextField(max_length=TEXT_LENGTH)

    class Meta:
        abstract = True
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.category}: {self.description[:60]}"

    @property
    def ticket_url(self) -> str | None:
        return ticket_link(self.ticket)


class ActionFields(models.Model):
    """What an action holds, in a site's report or an experiment's: what was done, and when."""

    description = models.CharField(max_length=500)
    taken_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["taken_at", "id"]

    def __str__(self) -> str:
        return self.description


class SiteReport(models.Model):
    """One site's report on one challenge: at most one per (challenge, site)."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="site_reports")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="reports")
    status = models.CharField(max_length=20, choices=ReportStatus.choices, default=ReportStatus.DRAFT)
    notes = models.TextField(blank=True, max_length=NOTES_LENGTH, help_text="free text in Markdown")
    notes_html = models.TextField(blank=True, editable=False, help_text="notes rendered and sanitised, once")

    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["challenge", "site__name"]
        constraints = [models.UniqueConstraint(fields=["challenge", "site"], name="site_report_unique")]

    def __str__(self) -> str:
        return f"{self.site} report on {self.challenge}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        """The notes are rendered here, once per change, never on a read (every writer saves through this)."""
        _rendered_on_save(self, "notes", "notes_html", kwargs)
        super().save(*args, **kwargs)

    @property
    def is_accepted(self) -> bool:
        return self.status == ReportStatus.ACCEPTED


class ObservedRate(models.Model):
    """A rate the site saw: for one of the challenge's targets, or free (a direction and a label)."""

    report = models.ForeignKey(SiteReport, on_delete=models.CASCADE, related_name="rates")
    target = models.ForeignKey(Target, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    label = models.CharField(max_length=200, blank=True, help_text="what was measured, when not a target")
    direction = models.CharField(max_length=4, choices=RateDirection.choices)
    rate = models.FloatField(help_text="bytes per second")
    start = models.DateTimeField()
    end = models.DateTimeField()

    class Meta:
        ordering = ["start", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(rate__gt=0), name="observed_rate_positive"),
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="observed_rate_end_after_start"),
        ]

    def __str__(self) -> str:
        return f"{self.label or self.target} {self.direction} {self.rate / 1e9:.3g} GB/s"


class Outage(models.Model):
    """A window in which the site (or part of it) was down or degraded."""

    report = models.ForeignKey(SiteReport, on_delete=models.CASCADE, related_name="outages")
    start = models.DateTimeField()
    end = models.DateTimeField()
    reason = models.CharField(max_length=300)

    class Meta:
        ordering = ["start", "id"]
        constraints = [models.CheckConstraint(condition=Q(end__gt=F("start")), name="outage_end_after_start")]

    def __str__(self) -> str:
        return f"{self.start:%Y-%m-%d %H:%M} → {self.end:%Y-%m-%d %H:%M}: {self.reason}"


class Problem(ProblemFields):
    """A problem met, with its category and the ticket that tracks it (a GGUS number or a URL)."""

    report = models.ForeignKey(SiteReport, on_delete=models.CASCADE, related_name="problems")


def ticket_link(ticket: str) -> str | None:
    """A ticket as a link: a URL as given, a bare GGUS number to its GGUS page."""
    ticket = ticket.strip()
    if ticket.startswith(("https://", "http://")):
        return ticket
    number = ticket.removeprefix("GGUS").removeprefix("#").strip(" :#")
    return f"https://ggus.eu/?mode=ticket_info&ticket_id={number}" if number.isdigit() else None


class SiteAction(ActionFields):
    """Something the site did, e.g. "raised MTU to 9000", and when."""

    report = models.ForeignKey(SiteReport, on_delete=models.CASCADE, related_name="actions")


class ReportComment(models.Model):
    """A remark on a report (Markdown): a comment, or the note that went with a review step."""

    report = models.ForeignKey(SiteReport, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=CommentKind.choices, default=CommentKind.COMMENT)
    text = models.TextField(blank=True, max_length=TEXT_LENGTH)
    text_html = models.TextField(blank=True, editable=False, help_text="text rendered and sanitised, once")

    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} by {self.author} on {self.report}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        _rendered_on_save(self, "text", "text_html", kwargs)
        super().save(*args, **kwargs)


class ExperimentReport(models.Model):
    """One experiment's part of a challenge's story, written by its contacts (the access policy's "narrate": the
    experiment's DDM role, and coordinators): its narrative, problems, actions, lessons and next steps; reviewed
    like a site report (draft, submitted, changes requested, accepted). At most one per (challenge, experiment)."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="experiment_reports")
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="reports")
    status = models.CharField(max_length=20, choices=ReportStatus.choices, default=ReportStatus.DRAFT)
    narrative = models.TextField(blank=True, max_length=NOTES_LENGTH, help_text="what happened, in Markdown")
    narrative_html = models.TextField(blank=True, editable=False, help_text="the narrative rendered and sanitised")
    lessons = models.TextField(blank=True, max_length=TEXT_LENGTH, help_text="lessons learned, one a line")
    next_steps = models.TextField(blank=True, max_length=TEXT_LENGTH, help_text="next steps, one a line")

    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    # Who reads and writes it: the access policy on its experiment (sites.roles).
    objects = ExperimentRestrictedQuerySet.as_manager()

    class Meta:
        ordering = ["challenge", "experiment__name"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "experiment"], name="experiment_report_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.experiment} report on {self.challenge}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        _rendered_on_save(self, "narrative", "narrative_html", kwargs)
        super().save(*args, **kwargs)


class ExperimentProblem(ProblemFields):
    """A problem an experiment met, with its category and ticket (a GGUS number or a URL)."""

    report = models.ForeignKey(ExperimentReport, on_delete=models.CASCADE, related_name="problems")


class ExperimentAction(ActionFields):
    """Something the experiment did, and when."""

    report = models.ForeignKey(ExperimentReport, on_delete=models.CASCADE, related_name="actions")
