"""Serializers of the site reports API. Rates in bytes per second, times ISO 8601 UTC. The rows of a report
(rates, outages, problems, actions) are written with it: a list given replaces that kind's rows."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from challenges.models import Challenge, Target
from sites.models import Site

from ..models import TEXT_LENGTH, ObservedRate, Outage, Problem, ReportComment, SiteAction, SiteReport


class ObservedRateSerializer(serializers.ModelSerializer[ObservedRate]):
    target = serializers.PrimaryKeyRelatedField(queryset=Target.objects.all(), required=False, allow_null=True)
    rate = serializers.FloatField(help_text="bytes per second, positive")

    class Meta:
        model = ObservedRate
        fields = ["target", "label", "direction", "rate", "start", "end"]


class OutageSerializer(serializers.ModelSerializer[Outage]):
    class Meta:
        model = Outage
        fields = ["start", "end", "reason"]


class ProblemSerializer(serializers.ModelSerializer[Problem]):
    ticket_url = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = Problem
        fields = ["category", "ticket", "ticket_url", "description"]


class SiteActionSerializer(serializers.ModelSerializer[SiteAction]):
    class Meta:
        model = SiteAction
        fields = ["description", "taken_at"]


class ReportCommentSerializer(serializers.ModelSerializer[ReportComment]):
    author = serializers.CharField(source="author.username", read_only=True, allow_null=True)
    html = serializers.SerializerMethodField(help_text="the text rendered from Markdown and sanitised")

    class Meta:
        model = ReportComment
        fields = ["id", "author", "kind", "text", "html", "created_at"]
        read_only_fields = ["kind", "created_at"]

    def get_html(self, comment: ReportComment) -> str:
        return comment.text_html


class ReviewSerializer(serializers.Serializer[Any]):
    text = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=TEXT_LENGTH, help_text="Markdown"
    )


ROW_SERIALIZERS = {
    "rates": ObservedRateSerializer,
    "outages": OutageSerializer,
    "problems": ProblemSerializer,
    "actions": SiteActionSerializer,
}


class SiteReportSerializer(serializers.ModelSerializer[SiteReport]):
    challenge = serializers.SlugRelatedField(slug_field="slug", queryset=Challenge.objects.all())
    site = serializers.SlugRelatedField(slug_field="name", queryset=Site.objects.all())
    author = serializers.CharField(source="author.username", read_only=True, allow_null=True)
    accepted_by = serializers.CharField(source="accepted_by.username", read_only=True, allow_null=True)
    notes_html = serializers.SerializerMethodField(help_text="the notes rendered from Markdown and sanitised")
    rates = ObservedRateSerializer(many=True, required=False)
    outages = OutageSerializer(many=True, required=False)
    problems = ProblemSerializer(many=True, required=False)
    actions = SiteActionSerializer(many=True, required=False)
    comments = ReportCommentSerializer(many=True, read_only=True)

    class Meta:
        model = SiteReport
        fields = [
            "id",
            "challenge",
            "site",
            "status",
            "notes",
            "notes_html",
            "author",
            "created_at",
            "updated_at",
            "submitted_at",
            "accepted_at",
            "accepted_by",
            "rates",
            "outages",
            "problems",
            "actions",
            "comments",
        ]
        read_only_fields = ["status", "created_at", "updated_at", "submitted_at", "accepted_at"]
        validators: list[Any] = []  # the service reports a second report of a site with a clear message

    def get_notes_html(self, report: SiteReport) -> str:
        return report.notes_html

    def content(self) -> dict[str, list[dict[str, Any]]]:
        """The validated rows, by kind, for reports.services.report_save."""
        return {kind: list(self.validated_data[kind]) for kind in ROW_SERIALIZERS if kind in self.validated_data}
