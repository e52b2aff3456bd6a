"""Rates API: target versus achieved of a challenge, one row per target (the definitions are in
results/rates.py). Everyone logged in reads; a DDM service reads the rows of its own experiment only.

Units: bytes, bytes per second; a failure ratio is a fraction of the files that ended inside the window."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from challenges.models import Challenge
from sites.permissions import PlanPermission

from .. import selectors
from ..rates import MET, MISSED, PARTLY

RATE_ROW_FIELDS = {
    "activity": serializers.CharField(),
    "experiment": serializers.CharField(),
    "mode": serializers.CharField(),
    "site": serializers.CharField(required=False, help_text="the site of a site target (absent for a link)"),
    "link": inline_serializer(
        "RateRowLink",
        {"from": serializers.CharField(), "to": serializers.CharField()},
        required=False,
        help_text="the two ends of a link target (absent for a site)",
    ),
    "direction": serializers.ChoiceField(
        choices=["in", "out"], allow_null=True, help_text="in or out of the site; null for a link"
    ),
    "target_rate": serializers.FloatField(help_text="bytes per second"),
    "average_rate": serializers.FloatField(help_text="bytes inside [start, end) / (end - start), B/s"),
    "max_rate": serializers.FloatField(help_text="best mean over the challenge's max_window, B/s"),
    "stable_rate": serializers.FloatField(
        allow_null=True, help_text="best mean over the stable_window, B/s; null when the activity is shorter"
    ),
    "volume": serializers.FloatField(help_text="bytes moved inside the window"),
    "files_ok": serializers.IntegerField(),
    "files_failed": serializers.IntegerField(),
    "failure_ratio": serializers.FloatField(allow_null=True, help_text="failed / (ok + failed); null without files"),
    "verdict": serializers.ChoiceField(
        choices=[MET, PARTLY, MISSED, "on track", "at risk", "will miss", "not started"],
        help_text="met, partly or missed once the window has ended; before: the live verdict (on track, at risk, "
        "will miss, met, not started), never missed",
    ),
    "window_ended": serializers.BooleanField(help_text="false while the window runs or has not begun"),
    "runs_outside_window": serializers.IntegerField(
        help_text="runs of the activity that ran wholly outside its window: not counted"
    ),
    "so_far": inline_serializer(
        "RateRowSoFar",
        {
            "at": serializers.DateTimeField(help_text="the minute these numbers end at"),
            "elapsed_seconds": serializers.FloatField(),
            "volume": serializers.FloatField(help_text="bytes inside the window so far"),
            "average_rate": serializers.FloatField(help_text="volume / elapsed_seconds, B/s"),
            "last_hour_rate": serializers.FloatField(),
            "required_rate": serializers.FloatField(allow_null=True),
            "projected_average_rate": serializers.FloatField(allow_null=True),
        },
        allow_null=True,
        help_text="null once the window has ended",
    ),
}


class ChallengeRatesView(APIView):
    """Target versus achieved: one row per target of the challenge."""

    permission_classes = [PlanPermission]

    @extend_schema(
        operation_id="challenges_rates",
        parameters=[
            OpenApiParameter("experiment", str, description="experiment (VO) name, any case"),
            OpenApiParameter("activity", str, description="activity name"),
            OpenApiParameter("site", str, description="site name: site targets there and links from or to it"),
        ],
        responses={
            200: inline_serializer(
                "ChallengeRates", {"rows": inline_serializer("RateRow", RATE_ROW_FIELDS, many=True)}
            ),
            404: OpenApiResponse(description="no such challenge (or none with the token's experiment)"),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        # As in the planning API: a challenge without the DDM service's experiment does not exist for it.
        challenge = get_object_or_404(Challenge.objects.restrict(request.user), slug=slug)
        params = request.query_params
        rates = selectors.challenge_rates(
            challenge=challenge,
            experiment=params.get("experiment", "").strip() or None,
            activity=params.get("activity", "").strip() or None,
            site=params.get("site", "").strip() or None,
            user=request.user,
        )
        return Response({"rows": [row.as_row() for row in rates]})
