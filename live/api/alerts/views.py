"""The now board and the alerts over the API: GET /api/v1/challenges/SLUG/now/, GET /api/v1/alerts/ (filters
challenge and state), POST /api/v1/alerts/ID/acknowledge/ and /silence/."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from challenges.selectors import challenge_for, challenges_visible
from common.services import service_call
from sites.permissions import PlanPermission

from ...choices import AlertState
from ...now import now_board
from ...selectors import alerts_visible
from ...services import alert_acknowledge, alert_silence
from .serializers import AlertSerializer, NowBoardSerializer, SilenceSerializer


class NowBoardView(APIView):
    """The challenge as it runs: every target's numbers at the board's minute, sites, sources, open alerts."""

    permission_classes = [PlanPermission]

    @extend_schema(operation_id="challenges_now", responses=NowBoardSerializer)
    def get(self, request: Request, slug: str) -> Response:
        challenge = challenge_for(slug=slug, user=request.user)
        return Response(NowBoardSerializer(now_board(challenge=challenge, user=request.user)).data)


@extend_schema(
    parameters=[
        OpenApiParameter("challenge", str, description="challenge slug"),
        OpenApiParameter("state", str, enum=AlertState.values),
    ]
)
class AlertViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Any]):
    """Alerts of the challenges the caller may read, newest first; acknowledge and silence (not for viewers)."""

    serializer_class = AlertSerializer
    lookup_value_regex = r"\d+"  # alerts/subscriptions/ and alerts/deliveries/ are other routes
    permission_classes = [IsAuthenticated]  # who may acknowledge or silence: the service asks the access policy

    def get_queryset(self) -> Any:
        params = self.request.query_params
        state = params.get("state", "").strip()
        if state and state not in AlertState.values:
            raise ValidationError({"state": [f"one of {', '.join(AlertState.values)}, not {state[:40]!r}"]})
        slug = params.get("challenge", "").strip()
        challenge = None
        if slug:
            challenge = challenges_visible(user=self.request.user).filter(slug=slug).first()
            if challenge is None:
                raise NotFound({"challenge": [f"no challenge {slug[:64]!r} that you may read"]})
        return alerts_visible(user=self.request.user, challenge=challenge, state=state or None)

    @extend_schema(request=None, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str | None = None) -> Response:
        alert = service_call(lambda: alert_acknowledge(alert=self.get_object(), user=request.user))
        return Response(AlertSerializer(alert).data)

    @extend_schema(request=SilenceSerializer, responses=AlertSerializer)
    @action(detail=True, methods=["post"])
    def silence(self, request: Request, pk: str | None = None) -> Response:
        given = SilenceSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        until = given.validated_data["until"]
        alert = service_call(lambda: alert_silence(alert=self.get_object(), user=request.user, until=until))
        return Response(AlertSerializer(alert).data)
