"""Results API: transfer records (read-only, filtered, bounded pagination, a DDM service sees its own
experiment's) and the failure rules (everyone reads, coordinators write and re-categorise).

Units: bytes, seconds, bytes per second; times ISO 8601 UTC."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from challenges.models import Challenge
from common.filters import StrictBooleanFilter
from sites.models import Experiment, Site
from sites.permissions import PlanPermission

from ..choices import RecordState
from ..failures.causes import (
    failure_pattern_problem,
    failure_rule_next_position,
)
from ..filters import RecordFilter
from ..models import FailureRule, TransferRecord
from ..selectors import records_visible_to
from ..tasks import failures_recategorize_on_commit
from .pagination import RecordKeysetPagination


class TransferRecordSerializer(serializers.ModelSerializer[TransferRecord]):
    experiment = serializers.SlugRelatedField[Experiment](slug_field="name", read_only=True, allow_null=True)
    # Named like the query parameters; DRF's metaclass takes declared fields off the class, so this does not
    # shadow Field.source (which mypy cannot know).
    source = serializers.SlugRelatedField[Site](  # type: ignore[assignment]
        source="source_site", slug_field="name", read_only=True, allow_null=True
    )
    destination = serializers.SlugRelatedField[Site](
        source="destination_site", slug_field="name", read_only=True, allow_null=True
    )
    category = serializers.CharField(source="error_category", read_only=True)
    duration = serializers.SerializerMethodField(help_text="seconds")
    rate = serializers.SerializerMethodField(help_text="bytes per second; null for failed or instantaneous")

    class Meta:
        model = TransferRecord
        fields = [
            "id",
            "experiment",
            "source",
            "destination",
            "source_url",
            "destination_url",
            "bytes",
            "start",
            "end",
            "duration",
            "rate",
            "state",
            "error_message",
            "category",
            "mode",
            "concurrency",
            "origin",
            "origin_id",
            "run",
            "activity",
            "ddm_activity",
        ]
        read_only_fields = fields

    def get_duration(self, record: TransferRecord) -> float:
        return (record.end - record.start).total_seconds()

    def get_rate(self, record: TransferRecord) -> float | None:
        seconds = (record.end - record.start).total_seconds()
        return record.bytes / seconds if record.state == RecordState.OK and seconds > 0 else None


class TransferRecordViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[TransferRecord]):
    """Transfer records, oldest first (start, id), filtered by challenge, sites, experiment, mode, concurrency,
    state and failure category, in pages of `limit` after the cursor of the previous page's `next` link (keyset:
    as fast a million records deep as on the first page; no count). A DDM token reads its own experiment's
    records only."""

    queryset = TransferRecord.objects.all()
    serializer_class = TransferRecordSerializer
    filterset_class = RecordFilter
    pagination_class = RecordKeysetPagination

    def get_queryset(self) -> QuerySet[TransferRecord]:
        return records_visible_to(user=self.request.user)


class FailureRuleSerializer(serializers.ModelSerializer[FailureRule]):
    position = serializers.IntegerField(min_value=0, required=False, help_text="tried from the lowest up")

    class Meta:
        model = FailureRule
        fields = ["id", "position", "pattern", "category", "enabled", "note"]

    def validate_pattern(self, value: str) -> str:
        problem = failure_pattern_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def create(self, validated_data: dict[str, Any]) -> FailureRule:
        validated_data.setdefault("position", failure_rule_next_position())
        return super().create(validated_data)


class FailureRuleFilter(django_filters.FilterSet):
    enabled = StrictBooleanFilter()

    class Meta:
        model = FailureRule
        fields = ["category", "enabled"]


class FailureRuleViewSet(viewsets.ModelViewSet[FailureRule]):
    """The ordered rules that sort error messages into failure categories. Coordinators write; every change
    re-categorises the stored failed records in the background once committed (POST .../recategorize/ does it
    now, for one challenge or all)."""

    queryset = FailureRule.objects.order_by("position", "id")
    serializer_class = FailureRuleSerializer
    permission_classes = [PlanPermission]
    filterset_class = FailureRuleFilter

    def perform_create(self, serializer: serializers.BaseSerializer[FailureRule]) -> None:
        super().perform_create(serializer)
        failures_recategorize_on_commit()

    def perform_update(self, serializer: serializers.BaseSerializer[FailureRule]) -> None:
        super().perform_update(serializer)
        failures_recategorize_on_commit()

    def perform_destroy(self, instance: FailureRule) -> None:
        super().perform_destroy(instance)
        failures_recategorize_on_commit()

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("challenge", str, description="only this challenge's records (slug)")],
        responses={
            202: inline_serializer(
                "RecategorizeQueued",
                {"detail": serializers.CharField(), "challenge": serializers.CharField(allow_null=True)},
            )
        },
    )
    @action(detail=False, methods=["post"])
    def recategorize(self, request: Request) -> Response:
        """Apply the current rules to the stored failed records (of one challenge, or all) in the background: a
        Celery task sent once this request commits (minutes for millions of records)."""
        slug = request.query_params.get("challenge") or request.data.get("challenge")
        challenge = None
        if slug:
            challenge = Challenge.objects.filter(slug=slug).first()
            if challenge is None:
                raise serializers.ValidationError({"challenge": [f"no challenge {slug!r}"]})
        failures_recategorize_on_commit(challenge=challenge)
        return Response(
            {"detail": "re-categorising in the background", "challenge": slug or None},
            status=status.HTTP_202_ACCEPTED,
        )
