"""The challenge report's own tables: its snapshots, frozen as they were made, and the coordinators' notes."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ReportSnapshot(models.Model):
    """The report of a challenge frozen at one moment: its content (JSON), HTML, PDF, Markdown zip and figures, as
    they were rendered then, whatever arrives later; numbered per challenge from 1. `public_key`, when set, opens it
    to anyone holding its link (no account); clearing it revokes the link."""

    challenge = models.ForeignKey("challenges.Challenge", on_delete=models.CASCADE, related_name="report_snapshots")
    version = models.PositiveIntegerField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField()
    at = models.DateTimeField(help_text="the minute the report's figures were taken at")
    state = models.CharField(max_length=16, help_text="the challenge then: not started, running or finished")
    content = models.JSONField(help_text="the report's content, the JSON every format was rendered from")
    html = models.TextField()
    pdf = models.BinaryField()
    markdown_zip = models.BinaryField()
    figures = models.JSONField(default=dict, help_text="name -> PNG, base64")
    pdf_sha256 = models.CharField(max_length=64)
    public_key = models.CharField(max_length=64, null=True, blank=True, unique=True, editable=False)
    published_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["challenge", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "version"], name="report_snapshot_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.challenge} report v{self.version}"


class ReportNotes(models.Model):
    """The coordinators' own words in a challenge's report: lessons learned and next steps (Markdown), beside what
    the experiments told."""

    challenge = models.OneToOneField("challenges.Challenge", on_delete=models.CASCADE, related_name="report_notes")
    lessons = models.TextField(blank=True, max_length=20_000, help_text="Markdown")
    next_steps = models.TextField(blank=True, max_length=20_000, help_text="Markdown")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"the coordinators' notes on {self.challenge}"
