"""Experiment reports API under /api/v1/experiment-reports/: list (filter by challenge, experiment, status), read,
create and change (the experiment's DDM role, until accepted; coordinators always), submit, accept, ask for
changes. Another experiment's writer gets 403 saying whose report it is, and nothing is stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from challenges.models import Challenge
from common.services import service_call
from sites.models import Experiment

from ..choices import ReportStatus
from ..experiments import (
    experiment_report_review,
    experiment_report_save,
    experiment_report_submit,
    experiment_report_write_problem,
    experiment_reports_readable,
    experiment_write_problem,
)
from ..models import ExperimentAction, ExperimentProblem, ExperimentReport

TEXTS = ("narrative", "lessons", "next_steps")


class ExperimentProblemSerializer(serializers.ModelSerializer[ExperimentProblem]):
    ticket_url = serializers.CharField(read_only=True, allow_null=True)

    class Meta:
        model = ExperimentProblem
        fields = ["category", "ticket", "ticket_url", "description"]


class ExperimentActionSerializer(serializers.ModelSerializer[ExperimentAction]):
    class Meta:
        model = ExperimentAction
        fields = ["description", "taken_at"]


class ExperimentReportSerializer(serializers.ModelSerializer[ExperimentReport]):
    challenge = serializers.SlugRelatedField(slug_field="slug", queryset=Challenge.objects.all())
    experiment = serializers.SlugRelatedField(slug_field="name", queryset=Experiment.objects.all())
    author = serializers.CharField(source="author.username", read_only=True, allow_null=True)
    accepted_by = serializers.CharField(source="accepted_by.username", read_only=True, allow_null=True)
    narrative_html = serializers.CharField(read_only=True, help_text="the narrative rendered and sanitised")
    problems = ExperimentProblemSerializer(many=True, required=False)
    actions = ExperimentActionSerializer(many=True, required=False)

    class Meta:
        model = ExperimentReport
        fields = [
            "id",
            "challenge",
            "experiment",
            "status",
            "narrative",
            "narrative_html",
            "lessons",
            "next_steps",
            "author",
            "created_at",
            "updated_at",
            "submitted_at",
            "accepted_at",
            "accepted_by",
            "problems",
            "actions",
        ]
        read_only_fields = ["status", "created_at", "updated_at", "submitted_at", "accepted_at"]
        validators: list[Any] = []  # the service says a second report of an experiment clearly

    def texts(self) -> dict[str, str]:
        return {name: self.validated_data[name] for name in TEXTS if name in self.validated_data}

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        return {
            kind: list(self.validated_data[kind]) for kind in ("problems", "actions") if kind in self.validated_data
        }


class ExperimentReportFilter(django_filters.FilterSet):
    challenge = django_filters.CharFilter(field_name="challenge__slug", help_text="the challenge's slug")
    experiment = django_filters.CharFilter(field_name="experiment__name", lookup_expr="iexact")
    status = django_filters.ChoiceFilter(choices=ReportStatus.choices)

    class Meta:
        model = ExperimentReport
        fields = ["challenge", "experiment", "status"]


class ExperimentReportViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet[ExperimentReport],
):
    """Experiment reports with their problems and actions."""

    queryset = (
        ExperimentReport.objects.select_related("challenge", "experiment", "author", "accepted_by")
        .prefetch_related("problems", "actions")
        .order_by("challenge__slug", "experiment__name", "id")
    )
    serializer_class = ExperimentReportSerializer
    filterset_class = ExperimentReportFilter

    def get_queryset(self) -> QuerySet[ExperimentReport]:
        return experiment_reports_readable(user=self.request.user, queryset=super().get_queryset())  # type: ignore[no-any-return]

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if not isinstance(request.data, Mapping):
            raise ValidationError({"non_field_errors": ["the body must be a JSON object with the report's fields"]})
        serializer = ExperimentReportSerializer(data=request.data, context=self.get_serializer_context())
        valid = serializer.is_valid()
        experiment = serializer.validated_data.get("experiment") if valid else None
        if experiment is None and "experiment" not in serializer.errors:
            experiment = serializer.fields["experiment"].to_internal_value(request.data.get("experiment"))
        # Whose report it is comes first: another experiment's writer learns nothing from the validation.
        problem = experiment_write_problem(user=request.user, experiment=experiment) if experiment else None
        if problem:
            raise PermissionDenied(problem)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        report = service_call(
            lambda: experiment_report_save(
                user=request.user,
                challenge=data["challenge"],
                experiment=data["experiment"],
                fields=serializer.texts(),
                rows=serializer.rows(),
            )
        )
        return Response(self._fresh(report), status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        report = self.get_object()
        problem = experiment_report_write_problem(user=request.user, report=report)
        if problem:
            raise PermissionDenied(problem)
        serializer = ExperimentReportSerializer(
            report, data=request.data, partial=kwargs.get("partial", False), context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        service_call(
            lambda: experiment_report_save(
                user=request.user,
                challenge=data.get("challenge", report.challenge),
                experiment=data.get("experiment", report.experiment),
                fields=serializer.texts(),
                rows=serializer.rows(),
                report=report,
            )
        )
        return Response(self._fresh(report))

    def _fresh(self, report: ExperimentReport) -> Any:
        fresh = self.get_queryset().get(pk=report.pk)
        return ExperimentReportSerializer(fresh, context=self.get_serializer_context()).data

    @extend_schema(request=None, responses={200: ExperimentReportSerializer})
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str) -> Response:
        """Hand the draft to the coordinators (the experiment's writers)."""
        report = self.get_object()
        service_call(lambda: experiment_report_submit(user=request.user, report=report))
        return Response(self._fresh(report))

    @extend_schema(request=None, responses={200: ExperimentReportSerializer})
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, pk: str) -> Response:
        """Accept a submitted report (coordinators)."""
        report = self.get_object()
        service_call(lambda: experiment_report_review(user=request.user, report=report, accept=True))
        return Response(self._fresh(report))

    @extend_schema(request=None, responses={200: ExperimentReportSerializer})
    @action(detail=True, methods=["post"], url_path="request-changes")
    def request_changes(self, request: Request, pk: str) -> Response:
        """Send a submitted report back to its experiment's writers (coordinators)."""
        report = self.get_object()
        service_call(lambda: experiment_report_review(user=request.user, report=report, accept=False))
        return Response(self._fresh(report))
