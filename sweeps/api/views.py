"""Sweeps API: coordinators start and cancel sweeps; everyone logged in reads them, their steps and their matrix.
A DDM token reads the sweeps of its own experiment's activities only (not ad hoc ones). The work is done by
sweeps.services; these views only call it."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from common.filters import IdFilter
from common.services import service_call
from sites.permissions import PlanPermission

from ..choices import SweepState
from ..models import Sweep
from ..selectors import sweeps_visible_to
from ..services import sweep_cancel, sweep_start
from ..tables import matrix_rows, network_rows, steps_of
from .serializers import SweepDetailSerializer, SweepMatrixSerializer, SweepSerializer, SweepStartSerializer


class SweepPermission(PlanPermission):
    """Everyone logged in reads; coordinators start and cancel."""

    message = "Only coordinators start or cancel sweeps."
    policy_actions = {"create": "start", "cancel": "cancel"}


class SweepFilter(django_filters.FilterSet):
    challenge = django_filters.CharFilter(field_name="activity__challenge__slug", label="challenge (slug)")
    activity = IdFilter(field_name="activity_id", label="activity (id)")
    state = django_filters.ChoiceFilter(choices=SweepState.choices)

    class Meta:
        model = Sweep
        fields = ["challenge", "activity", "state"]


class SweepViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Sweep]):
    queryset = Sweep.objects.none()  # see get_queryset: scoped per user
    permission_classes = [SweepPermission]
    filterset_class = SweepFilter

    def get_queryset(self) -> QuerySet[Sweep]:
        return sweeps_visible_to(user=self.request.user).order_by("-created_at", "-id")

    def get_serializer_class(self) -> Any:
        if self.action == "list":
            return SweepSerializer
        if self.action == "create":
            return SweepStartSerializer
        if self.action == "matrix":
            return SweepMatrixSerializer
        return SweepDetailSerializer

    def _fresh(self, sweep: Sweep) -> Sweep:
        return sweeps_visible_to(user=self.request.user).get(pk=sweep.pk)

    @extend_schema(
        request=SweepStartSerializer,
        responses={
            201: SweepDetailSerializer,
            400: OpenApiResponse(description="per-field messages (unknown site, no endpoint, no room); nothing made"),
            401: OpenApiResponse(description="not authenticated"),
            403: OpenApiResponse(description="only coordinators start sweeps"),
        },
    )
    def create(self, request: Request) -> Response:
        """Start a sweep: every link in every mode and concurrency, one step at a time, each an ordinary run from
        the link's source site (its queue `site.<NAME>`, else the portal's default queue), with iperf3 and the
        path MTU per link when `network`. The disk is checked first: a sweep that cannot fit is refused with the
        numbers."""
        serializer = SweepStartSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        unknown = sorted(set(request.data) - set(serializer.fields))  # a typo must not quietly take a default
        if unknown:
            known = ", ".join(sorted(serializer.fields))
            raise ValidationError(
                {"non_field_errors": [f"unknown field {name[:100]!r} (known: {known})" for name in unknown[:20]]}
            )
        data = dict(serializer.validated_data)
        activity = data.pop("activity", None)
        if "links" in data:
            data["links"] = [dict(link) for link in data["links"]]
        sweep = service_call(
            lambda: sweep_start(user=request.user, data=data, activity=activity), refused=SweepPermission.message
        )
        return Response(SweepDetailSerializer(self._fresh(sweep)).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses={
            200: SweepDetailSerializer,
            400: OpenApiResponse(description="the sweep has already ended"),
            403: OpenApiResponse(description="only coordinators cancel sweeps"),
        },
    )
    @action(detail=True, methods=["post"], filter_backends=[])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel the sweep: its pending steps are cancelled and its current step's run too."""
        sweep = self.get_object()
        service_call(lambda: sweep_cancel(sweep, user=request.user), refused=SweepPermission.message)
        return Response(SweepDetailSerializer(self._fresh(sweep)).data)

    @extend_schema(responses={200: SweepMatrixSerializer})
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def matrix(self, request: Request, pk: str) -> Response:
        """What the sweep measured: a row per transfer step (files ok and failed, failure ratio, the aggregate rate
        over the step's active window, the sum of single-file rates, the top error, where it was measured from)
        and a network row per link (iperf3 in bits and bytes per second, retransmits, path MTU, MTU mismatch)."""
        sweep = self.get_object()
        steps = steps_of(sweep)
        body = {
            "sweep": sweep.pk,
            "state": sweep.state,
            "rows": matrix_rows(sweep, steps),
            "network": network_rows(sweep, steps),
        }
        return Response(body)
