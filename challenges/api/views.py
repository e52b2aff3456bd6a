"""Planning API: challenges, activities and targets (coordinators write), the plan document, and the clock
for DDM injectors. A DDM token reads the plans of its own experiment only."""

from __future__ import annotations

import django_filters
from django.db.models import Prefetch, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from challenges import documents, injection, plan
from challenges.models import Activity, Challenge, Target
from common.filters import IdFilter
from sites.models import Experiment
from sites.permissions import PlanPermission
from sites.roles import experiments_visible

from .renderers import InjectionPlansCsvRenderer
from .serializers import ActivitySerializer, ChallengeSerializer, InjectionPlansSerializer, TargetSerializer


class ChallengePermission(PlanPermission):
    """Everyone logged in reads; coordinators import plan documents and edit challenges (the access policy's "import"
    and "edit")."""

    policy_actions = {"import_document": "import"}


class ChallengeViewSet(viewsets.ModelViewSet[Challenge]):
    queryset = Challenge.objects.select_related("compare_with")
    serializer_class = ChallengeSerializer
    permission_classes = [ChallengePermission]
    lookup_field = "slug"
    filterset_fields = ["slug"]

    def get_queryset(self) -> QuerySet[Challenge]:
        return super().get_queryset().restrict(self.request.user)  # type: ignore[attr-defined, no-any-return]

    @extend_schema(
        request={"application/json": dict, "application/yaml": dict},
        responses={
            200: OpenApiResponse(description="counts of created, updated and deleted rows"),
            400: OpenApiResponse(description='{"errors": [{"place": "activities[0].end", "error": "..."}]}'),
        },
    )
    @action(detail=False, methods=["post"], url_path="import")
    def import_document(self, request: Request) -> Response:
        """Create or update a challenge from its plan document (JSON or YAML), all or nothing."""
        try:
            document = documents.plan_document_load(text=request.body, content_type=request.content_type)
            summary = plan.plan_import(document=document)
        except documents.PlanDocumentError as exc:
            return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        return Response(summary.as_dict())

    @extend_schema(responses={200: OpenApiResponse(description="the plan document")})
    @action(detail=True, methods=["get"])
    def plan(self, request: Request, slug: str) -> Response:
        """The challenge as a plan document (the shape import takes); a DDM service sees its experiment only."""
        return Response(plan.plan_export(challenge=self.get_object(), user=request.user))

    @extend_schema(
        responses={
            (200, "application/json"): InjectionPlansSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="the CSV Rucio's CLI imports"),
        }
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="injection-plans",
        renderer_classes=[JSONRenderer, BrowsableAPIRenderer, InjectionPlansCsvRenderer],
    )
    def injection_plans(self, request: Request, slug: str) -> Response:
        """Rucio load injection plans from the clock (inject_rate in Mbps, as Rucio's submitter reads it), and the
        links that give none; ?format=csv is the file `rucio loadinjection add --csv-file` imports."""
        challenge = self.get_object()
        plans, problems = injection.injection_plans(challenge=challenge, user=request.user)
        if request.accepted_renderer.format == "csv":
            response = Response(injection.injection_csv_rows(plans=plans))
            response["Content-Disposition"] = f'attachment; filename="{challenge.slug}-injection-plans.csv"'
            return response
        payload = {
            "unit": "Mbps",
            "unit_note": injection.UNIT_NOTE,
            "plans": [injection.injection_plan_dict(item) for item in plans],
            "problems": [injection.injection_problem_dict(item) for item in problems],
        }
        return Response(InjectionPlansSerializer(payload).data)


class ActivityFilter(django_filters.FilterSet):
    """?challenge=SLUG (as on /runs/ and the pages), ?experiment=NAME, ?kind=, ?mode=; the older
    ?challenge__slug= and ?experiment__name= still work."""

    challenge = django_filters.CharFilter(field_name="challenge__slug", label="challenge (slug)")
    challenge__slug = django_filters.CharFilter(field_name="challenge__slug")
    experiment = django_filters.CharFilter(field_name="experiment__name", lookup_expr="iexact")
    experiment__name = django_filters.CharFilter(field_name="experiment__name", lookup_expr="iexact")

    class Meta:
        model = Activity
        fields = ["challenge", "experiment", "kind", "mode"]


class TargetFilter(django_filters.FilterSet):
    """?activity=ID (an id that no activity has selects none, as the schema's integer allows), ?site__name=,
    ?activity__challenge__slug=."""

    activity = IdFilter(field_name="activity_id", label="activity (id)")
    activity__challenge__slug = django_filters.CharFilter(field_name="activity__challenge__slug")
    site__name = django_filters.CharFilter(field_name="site__name")

    class Meta:
        model = Target
        fields = ["activity", "activity__challenge__slug", "site__name"]


class ActivityViewSet(viewsets.ModelViewSet[Activity]):
    queryset = Activity.objects.select_related("challenge", "experiment", "source").prefetch_related(
        Prefetch("targets", queryset=Target.objects.select_related("activity", "site", "link_from", "link_to"))
    )
    serializer_class = ActivitySerializer
    permission_classes = [PlanPermission]
    filterset_class = ActivityFilter

    def get_queryset(self) -> QuerySet[Activity]:
        return super().get_queryset().restrict(self.request.user)  # type: ignore[attr-defined, no-any-return]


class TargetViewSet(viewsets.ModelViewSet[Target]):
    queryset = Target.objects.select_related("activity", "site", "link_from", "link_to")
    serializer_class = TargetSerializer
    permission_classes = [PlanPermission]
    filterset_class = TargetFilter

    def get_queryset(self) -> QuerySet[Target]:
        return super().get_queryset().restrict(self.request.user)  # type: ignore[attr-defined, no-any-return]


class ClockNowView(APIView):
    """The activities running now, with their targets: what an injector follows. ?experiment=NAME for one
    experiment; without it, every experiment the caller reads (a DDM token: its own)."""

    permission_classes = [PlanPermission]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "experiment",
                str,
                required=False,
                description="experiment (VO) name; without it, every experiment the caller reads (a DDM token: its "
                "own experiments)",
            )
        ],
        responses={
            200: inline_serializer(
                "ClockNow",
                {
                    "now": serializers.DateTimeField(),
                    "experiment": serializers.CharField(allow_null=True, help_text="the one asked for, else null"),
                    "experiments": serializers.ListField(
                        child=serializers.CharField(), help_text="the experiments this answer covers"
                    ),
                    "activities": ActivitySerializer(many=True),
                },
            )
        },
    )
    def get(self, request: Request) -> Response:
        name = request.query_params.get("experiment", "").strip()
        experiments = experiments_visible(user=request.user).order_by("name")
        if name:
            experiment = get_object_or_404(Experiment, name__iexact=name)
            experiments = experiments.filter(pk=experiment.pk)
            if not experiments:
                raise PermissionDenied(f"this token reads the plans of its own experiment, not {experiment.name}")
        now = timezone.now()
        running = ActivityViewSet.queryset.filter(
            Q(start__lte=now) & Q(end__gt=now), experiment__in=experiments
        ).order_by("experiment__name", "start", "pk")
        return Response(
            {
                "now": now,
                "experiment": experiments[0].name if name else None,
                "experiments": [experiment.name for experiment in experiments],
                "activities": ActivitySerializer(running, many=True).data,
            }
        )
