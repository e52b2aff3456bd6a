"""Runs API: coordinators start and cancel runs; everyone logged in reads them with their live progress and
per-file outcomes. A DDM token reads the runs of its own experiment's activities only (not ad hoc runs).
The work itself is done by runs.services and the Celery tasks; these views only call them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from challenges.choices import ActivityKind
from common.filters import IdFilter
from common.services import service_call
from common.units import is_whole_number
from results.matrix.cells import SPLITS, link_matrix
from results.matrix.measured import runs_agent_sites, runs_measured_label
from results.models import TransferRecord
from sites.permissions import PlanPermission

from ..choices import FileState, RunState
from ..copies import run_copies_delete
from ..models import Run, RunFile
from ..selectors import runs_visible_to
from ..services import run_cancel, run_start
from .serializers import (
    LinkMatrixSerializer,
    RunDetailSerializer,
    RunFileSerializer,
    RunSerializer,
    RunStartSerializer,
)


class RunPermission(PlanPermission):
    """Everyone logged in reads; coordinators start and cancel."""

    message = "Only coordinators start or cancel runs."
    policy_actions = {"create": "start", "cancel": "cancel", "delete_copies": "cancel"}


class RunFilter(django_filters.FilterSet):
    challenge = django_filters.CharFilter(field_name="activity__challenge__slug", label="challenge (slug)")
    activity = IdFilter(field_name="activity_id", label="activity (id)")
    state = django_filters.ChoiceFilter(choices=RunState.choices)
    kind = django_filters.ChoiceFilter(choices=ActivityKind.choices)

    class Meta:
        model = Run
        fields = ["challenge", "activity", "state", "kind"]


class RunFileFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=FileState.choices)

    class Meta:
        model = RunFile
        fields = ["state"]


def _service(call: Callable[[], Run]) -> Run:
    return service_call(call, refused=RunPermission.message)


MAX_MATRIX_RUNS = 100
# What the matrix's parameters take, said in the schema as _ids and _matrix_body check it.
RUN_IDS_PATTERN = rf"^[0-9]{{1,18}}(,[0-9]{{1,18}}){{0,{MAX_MATRIX_RUNS - 1}}}$"
SPLIT_PATTERN = r"^((mode|concurrency)(,(mode|concurrency))?)?$"


def _ids(text: str, *, field: str) -> list[int]:
    words = [word.strip() for word in text.split(",") if word.strip()]
    if not words:
        raise ValidationError({field: ["give run ids, comma-separated: ?runs=12,13"]})
    if len(words) > MAX_MATRIX_RUNS:
        raise ValidationError({field: [f"at most {MAX_MATRIX_RUNS} runs, not {len(words)}"]})
    if not all(is_whole_number(word) and len(word) < 19 for word in words):
        raise ValidationError({field: [f"run ids are whole numbers: {text[:200]!r}"]})
    return [int(word) for word in words]


def _matrix_body(runs: QuerySet[Run], request: Request) -> dict[str, Any]:
    split = [word.strip() for word in request.query_params.get("split", "").split(",") if word.strip()]
    if set(split) - set(SPLITS):
        raise ValidationError({"split": [f"split by {', '.join(SPLITS)}, not {', '.join(split)}"]})
    run_ids = sorted(runs.values_list("pk", flat=True))
    cells = link_matrix(TransferRecord.objects.filter(run_id__in=run_ids), split=split)
    agent_sites = runs_agent_sites(run_ids)  # the challenge matrix's label, computed once (results.matrix.measured)
    rows = [cell.as_row() | {"measured_by": runs_measured_label(cell.runs, agent_sites)} for cell in cells]
    return {"runs": run_ids, "split": split, "rows": rows}


class RunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Run]):
    queryset = Run.objects.none()  # see get_queryset: scoped per user
    serializer_class = RunSerializer
    permission_classes = [RunPermission]
    filterset_class = RunFilter

    def get_queryset(self) -> QuerySet[Run]:
        return runs_visible_to(user=self.request.user).order_by("-created_at", "-id")

    def get_serializer_class(self) -> Any:
        if self.action == "list":
            return RunSerializer
        if self.action == "create":
            return RunStartSerializer
        if self.action == "files":
            return RunFileSerializer
        return RunDetailSerializer

    @extend_schema(
        request=RunStartSerializer,
        responses={
            201: RunDetailSerializer,
            400: OpenApiResponse(description='per-field messages, e.g. {"parameters": ["..."]}; nothing is created'),
            401: OpenApiResponse(description="not authenticated"),
            403: OpenApiResponse(description="only coordinators start runs"),
        },
    )
    def create(self, request: Request) -> Response:
        """Start a run of an activity (its parameters overridden by `parameters`) or an ad hoc run of `kind`."""
        serializer = RunStartSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run = _service(
            lambda: run_start(
                user=request.user,
                activity=data.get("activity"),
                kind=data.get("kind") or None,
                parameters=data.get("parameters") or {},
            )
        )
        return Response(RunDetailSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses={
            200: RunDetailSerializer,
            400: OpenApiResponse(description="the run cannot be cancelled (e.g. it has ended)"),
            403: OpenApiResponse(description="only coordinators cancel runs"),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel the run: its queued files are cancelled and its copies in flight aborted."""
        run = self.get_object()
        run = _service(lambda: run_cancel(run, user=request.user))
        return Response(RunDetailSerializer(run).data)

    @extend_schema(
        request=None,
        responses={
            200: RunDetailSerializer,
            400: OpenApiResponse(description="nothing to delete: the run has not ended, or its copies are gone"),
            403: OpenApiResponse(description="only coordinators delete a run's copies"),
        },
    )
    @action(detail=True, methods=["post"], url_path="delete-copies")
    def delete_copies(self, request: Request, pk: str) -> Response:
        """Delete the destination copies an ended run kept (keep_copies) or could not delete: a worker deletes
        them with gfal2; `copies` says when they are gone."""
        run = self.get_object()
        run = _service(lambda: run_copies_delete(run, user=request.user))
        return Response(RunDetailSerializer(run).data)

    @extend_schema(
        operation_id="runs_matrix",
        parameters=[
            OpenApiParameter(
                "runs",
                str,
                required=True,
                pattern=RUN_IDS_PATTERN,
                description="comma-separated run ids (those you may read), at most 100",
            ),
            OpenApiParameter("split", str, pattern=SPLIT_PATTERN, description="comma-separated: mode, concurrency"),
        ],
        responses={
            200: LinkMatrixSerializer,
            400: OpenApiResponse(description="runs missing, not whole numbers, too many, or an unknown split"),
        },
    )
    @action(detail=False, methods=["get"], filter_backends=[], pagination_class=None)
    def matrix(self, request: Request) -> Response:
        """The FROM x TO matrix of a set of runs: per link (and mode, concurrency when split) the bytes over the time
        the link was active, the sum of single-file rates, files ok/failed, failure ratio, runs and top error."""
        ids = _ids(request.query_params.get("runs", ""), field="runs")
        runs = self.get_queryset().filter(pk__in=ids)
        return Response(_matrix_body(runs, request))

    @extend_schema(
        operation_id="runs_run_matrix",
        parameters=[
            OpenApiParameter("split", str, pattern=SPLIT_PATTERN, description="comma-separated: mode, concurrency")
        ],
        responses={200: LinkMatrixSerializer, 400: OpenApiResponse(description="an unknown split")},
    )
    @action(detail=True, methods=["get"], url_path="matrix", filter_backends=[], pagination_class=None)
    def run_matrix(self, request: Request, pk: str) -> Response:
        """This run's FROM x TO matrix (see /runs/matrix/)."""
        run = self.get_object()
        return Response(_matrix_body(Run.objects.filter(pk=run.pk), request))

    @extend_schema(
        responses=RunFileSerializer(many=True),
        parameters=[OpenApiParameter("state", str, enum=FileState.values, description="only files in this state")],
    )
    @action(detail=True, methods=["get"], filter_backends=[])  # the runs' filters are not the files'
    def files(self, request: Request, pk: str) -> Response:
        """The run's files in index order, paginated: state, attempt, worker, real start and end, bytes, the
        mode gfal2 really used and its message when the file failed. ?state= filters."""
        run = self.get_object()
        filterset = RunFileFilter(request.query_params, queryset=RunFile.objects.filter(run=run).order_by("index"))
        if not filterset.is_valid():
            raise ValidationError(filterset.errors)
        page = self.paginate_queryset(filterset.qs)
        return self.get_paginated_response(RunFileSerializer(page, many=True).data)
