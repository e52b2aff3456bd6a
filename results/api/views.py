"""Rates API: target versus achieved of a challenge, one row per target (the definitions are in
results/targets/rates.py). Everyone logged in reads; a DDM service reads the rows of its own experiment only.

Units: bytes, bytes per second; a failure ratio is a fraction of the files that ended inside the window."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from challenges.choices import ActivityKind, Direction
from challenges.selectors import challenge_for
from sites.permissions import PlanPermission

from .. import selectors
from ..choices import Verdict
from ..targets.figures import figures_row

RATE = "bytes per second"


class NetworkMeasuredSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """One measurement of a network target: its run, the rate it measured and when it ended."""

    run = serializers.IntegerField()
    rate = serializers.FloatField(help_text=RATE)
    at = serializers.DateTimeField(help_text="when the run ended")


# The row of a target's figures (results.targets.figures.figures_row): the rates API, the now API and the exports.
RATE_ROW_FIELDS = {
    "id": serializers.IntegerField(help_text="the target's id"),
    "url": serializers.CharField(allow_null=True, help_text="the target's page"),
    "activity": serializers.CharField(),
    "experiment": serializers.CharField(),
    "mode": serializers.CharField(),
    "kind": serializers.ChoiceField(choices=ActivityKind.choices),
    "site": serializers.CharField(allow_null=True, help_text="the site of a site target; null for a link"),
    "link": inline_serializer(
        "RateRowLink",
        {"from": serializers.CharField(), "to": serializers.CharField()},
        allow_null=True,
        help_text="the two ends of a link target; null for a site",
    ),
    "direction": serializers.ChoiceField(
        choices=Direction.choices, allow_null=True, help_text="in or out of the site; null for a link"
    ),
    "target_rate": serializers.FloatField(help_text=RATE),
    "window_start": serializers.DateTimeField(),
    "window_end": serializers.DateTimeField(),
    "window_ended": serializers.BooleanField(help_text="false while the window runs or has not begun"),
    "at": serializers.DateTimeField(allow_null=True, help_text="the minute the figures so far end at; null once ended"),
    "measured_by": serializers.ChoiceField(
        choices=["transfers", "iperf3"], help_text="iperf3 for a network target: its runs' measured throughput"
    ),
    "volume": serializers.FloatField(
        allow_null=True, help_text="bytes inside the window (so far while it runs); null for a network target"
    ),
    "average_rate": serializers.FloatField(
        help_text="volume / the part of the window that has passed (the whole window once ended), B/s; for a network "
        "target the mean of its measurements"
    ),
    "max_rate": serializers.FloatField(help_text="best mean over the challenge's max_window (network: best run), B/s"),
    "stable_rate": serializers.FloatField(
        allow_null=True, help_text="best mean over the stable_window, B/s; null when the activity is shorter"
    ),
    "last_15min_rate": serializers.FloatField(allow_null=True, help_text="B/s; null once ended and for network"),
    "last_hour_rate": serializers.FloatField(allow_null=True, help_text="B/s; null once ended and for network"),
    "required_rate": serializers.FloatField(allow_null=True, help_text="what the rest of the window must average"),
    "projected_average_rate": serializers.FloatField(allow_null=True),
    "files_ok": serializers.IntegerField(),
    "files_failed": serializers.IntegerField(),
    "failure_ratio": serializers.FloatField(allow_null=True, help_text="failed / (ok + failed); null without files"),
    "verdict": serializers.ChoiceField(
        choices=Verdict.choices,
        help_text="met, partly or missed once the window has ended; before: the live verdict, never missed; a "
        "network target's from its measurements",
    ),
    "runs_outside_window": serializers.IntegerField(
        help_text="runs of the activity that ran wholly outside its window: not counted"
    ),
    "network": inline_serializer(
        "RateRowNetwork",
        {
            "runs": serializers.IntegerField(),
            "latest": NetworkMeasuredSerializer(allow_null=True),
            "best": NetworkMeasuredSerializer(allow_null=True),
            "mean_rate": serializers.FloatField(allow_null=True),
        },
        allow_null=True,
        help_text="a network target's iperf3 measurements inside the window; null for other targets",
    ),
    "so_far": inline_serializer(
        "RateRowSoFar",
        {
            "at": serializers.DateTimeField(help_text="the minute these numbers end at"),
            "elapsed_seconds": serializers.FloatField(),
            "volume": serializers.FloatField(help_text="bytes inside the window so far"),
            "average_rate": serializers.FloatField(help_text="volume / elapsed_seconds, B/s"),
            "last_15min_rate": serializers.FloatField(),
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
                "ChallengeRates", {"rows": inline_serializer("RateRow", dict(RATE_ROW_FIELDS), many=True)}
            ),
            404: OpenApiResponse(description="no such challenge (or none with the token's experiment)"),
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        # As in the planning API: a challenge without the DDM service's experiment does not exist for it.
        challenge = challenge_for(slug=slug, user=request.user)
        params = request.query_params
        rates = selectors.challenge_rates(
            challenge=challenge,
            experiment=params.get("experiment", "").strip() or None,
            activity=params.get("activity", "").strip() or None,
            site=params.get("site", "").strip() or None,
            user=request.user,
        )
        return Response({"rows": [figures_row(row) for row in rates]})
