"""Site reports API under /api/v1/reports/: list (filter by challenge, site, status), read, create and change
(the site's admins, until accepted; coordinators always), submit, comment, accept and ask for changes. A site admin
writing for another site gets 403 saying whose admin they are, and nothing is stored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import django_filters
from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from common.services import service_call

from .. import permissions, services
from ..choices import ReportStatus
from ..models import ReportComment, SiteReport
from .serializers import ReportCommentSerializer, ReviewSerializer, SiteReportSerializer


class SiteReportFilter(django_filters.FilterSet):
    challenge = django_filters.CharFilter(field_name="challenge__slug", help_text="the challenge's slug")
    site = django_filters.CharFilter(field_name="site__name", lookup_expr="iexact", help_text="the site's name")
    status = django_filters.ChoiceFilter(choices=ReportStatus.choices)

    class Meta:
        model = SiteReport
        fields = ["challenge", "site", "status"]


class SiteReportViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet[SiteReport],
):
    """Site reports with their rates, outages, problems, actions and comments."""

    queryset = (
        SiteReport.objects.select_related("challenge", "site", "author", "accepted_by")
        .prefetch_related(
            "rates",
            "outages",
            "problems",
            "actions",
            Prefetch("comments", queryset=ReportComment.objects.select_related("author")),
        )
        .order_by("challenge__slug", "site__name", "id")
    )
    serializer_class = SiteReportSerializer
    filterset_class = SiteReportFilter

    def get_queryset(self) -> QuerySet[SiteReport]:
        return permissions.reports_readable_by(user=self.request.user, queryset=super().get_queryset())

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        serializer = SiteReportSerializer(data=request.data, context=self.get_serializer_context())
        valid = serializer.is_valid()
        site = getattr(serializer, "validated_data", {}).get("site") if valid else None
        if site is None and "site" not in serializer.errors:
            if not isinstance(request.data, Mapping):
                raise ValidationError({"non_field_errors": ["the body must be a JSON object with the report's fields"]})
            site = serializer.fields["site"].to_internal_value(request.data.get("site"))
        # Whose report it is comes first: another site's admin learns nothing from the validation.
        problem = permissions.site_write_problem(user=request.user, site=site) if site is not None else None
        if problem:
            raise PermissionDenied(problem)
        serializer.is_valid(raise_exception=True)
        report = service_call(
            lambda: services.report_save(
                user=request.user,
                challenge=serializer.validated_data["challenge"],
                site=serializer.validated_data["site"],
                notes=serializer.validated_data.get("notes", ""),
                content=serializer.content(),
            )
        )
        return Response(self._fresh(report), status=status.HTTP_201_CREATED)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        report = self.get_object()
        problem = permissions.report_write_problem(user=request.user, report=report)
        if problem:
            raise PermissionDenied(problem)
        serializer = SiteReportSerializer(
            report, data=request.data, partial=kwargs.get("partial", False), context=self.get_serializer_context()
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        service_call(
            lambda: services.report_save(
                user=request.user,
                challenge=data.get("challenge", report.challenge),
                site=data.get("site", report.site),
                notes=data.get("notes"),
                content=serializer.content(),
                report=report,
            )
        )
        return Response(self._fresh(report))

    def _fresh(self, report: SiteReport) -> Any:
        return SiteReportSerializer(self.get_queryset().get(pk=report.pk), context=self.get_serializer_context()).data

    def get_serializer_class(self) -> type[BaseSerializer[Any]]:
        if self.action == "comment":
            return ReportCommentSerializer
        if self.action in ("accept", "request_changes", "submit"):
            return ReviewSerializer
        return super().get_serializer_class()

    @extend_schema(request=None, responses={200: SiteReportSerializer})
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str) -> Response:
        """Hand the draft to the coordinators (the site's admins)."""
        report = self.get_object()
        service_call(lambda: services.report_submit(user=request.user, report=report))
        return Response(self._fresh(report))

    @extend_schema(request=ReportCommentSerializer, responses={201: ReportCommentSerializer})
    @action(detail=True, methods=["post"])
    def comment(self, request: Request, pk: str) -> Response:
        """Comment in Markdown (coordinators and the site's admins)."""
        report = self.get_object()
        text = str(request.data.get("text", "")) if hasattr(request.data, "get") else ""
        comment = service_call(lambda: services.report_comment(user=request.user, report=report, text=text))
        return Response(ReportCommentSerializer(comment).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ReviewSerializer, responses={200: SiteReportSerializer})
    @action(detail=True, methods=["post"])
    def accept(self, request: Request, pk: str) -> Response:
        """Accept a submitted report, with an optional note (coordinators)."""
        report = self.get_object()
        review = ReviewSerializer(data=request.data)
        review.is_valid(raise_exception=True)
        text = review.validated_data["text"]
        service_call(lambda: services.report_accept(user=request.user, report=report, text=text))
        return Response(self._fresh(report))

    @extend_schema(request=ReviewSerializer, responses={200: SiteReportSerializer})
    @action(detail=True, methods=["post"], url_path="request-changes")
    def request_changes(self, request: Request, pk: str) -> Response:
        """Send a submitted report back to the site's admins, saying what to change (coordinators)."""
        report = self.get_object()
        review = ReviewSerializer(data=request.data)
        review.is_valid(raise_exception=True)
        text = review.validated_data["text"]
        service_call(lambda: services.report_request_changes(user=request.user, report=report, text=text))
        return Response(self._fresh(report))
