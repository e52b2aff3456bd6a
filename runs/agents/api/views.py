"""The agents' API (`Authorization: Agent KEY` only): claim jobs by long poll, beat, report results. Thin: the
services in runs.agents.services decide; an agent reads and writes its own site's work only (sites.roles)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from common.services import service_call
from sites.authentication import AgentAuthentication
from sites.models import SiteAgent

from .. import services
from .serializers import (
    ClaimedSerializer,
    ClaimSerializer,
    HeartbeatSerializer,
    ResultSerializer,
    StopSerializer,
    StoredSerializer,
)


class IsSiteAgent(BasePermission):
    """The caller is a site's live agent (its key checked by AgentAuthentication)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not isinstance(request.auth, SiteAgent):
            raise NotAuthenticated("This is for sites' agents: `Authorization: Agent KEY`.")
        return True


class AgentRateThrottle(SimpleRateThrottle):
    """Per agent (API_THROTTLE_AGENT): many agents may call from one address, and one agent calls often."""

    scope = "agent"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        agent = request.auth
        ident = f"agent-{agent.pk}" if isinstance(agent, SiteAgent) else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AgentView(APIView):
    authentication_classes = [AgentAuthentication]
    permission_classes = [IsSiteAgent]
    throttle_classes = [AgentRateThrottle]

    @staticmethod
    def agent(request: Request) -> SiteAgent:
        """The calling agent (IsSiteAgent made sure there is one)."""
        assert isinstance(request.auth, SiteAgent)
        return request.auth


class ClaimView(AgentView):
    @extend_schema(request=ClaimSerializer, responses=ClaimedSerializer, summary="Take the site's next jobs")
    def post(self, request: Request) -> Response:
        """Up to `most` of the site's waiting jobs; none waiting, the answer comes when one is offered or after
        `wait` s (a long poll)."""
        claim = ClaimSerializer(data=request.data, context={"request": request})
        claim.is_valid(raise_exception=True)
        jobs = services.jobs_claim(
            agent=self.agent(request), most=claim.validated_data["most"], wait=claim.validated_data["wait"]
        )
        return Response({"jobs": jobs})


class HeartbeatView(AgentView):
    @extend_schema(request=HeartbeatSerializer, responses=StopSerializer, summary="The agent is alive")
    def post(self, request: Request) -> Response:
        """Its version, probe kinds and jobs in flight; answered with the jobs it must stop."""
        beat = HeartbeatSerializer(data=request.data, context={"request": request})
        beat.is_valid(raise_exception=True)
        data = beat.validated_data
        in_flight = [(item["id"], item["bytes"]) for item in data["in_flight"]]
        stop = services.agent_heartbeat(
            agent=self.agent(request), version=data["version"], kinds=data["kinds"], in_flight=in_flight
        )
        return Response({"stop": stop})


class ResultView(AgentView):
    @extend_schema(request=ResultSerializer, responses=StoredSerializer, summary="A job's result, stored once")
    def post(self, request: Request, job_id: int) -> Response:
        """What the job measured; sent again, it is stored once (`stored`: false)."""
        result = ResultSerializer(data=request.data, context={"request": request})
        result.is_valid(raise_exception=True)
        data = dict(result.validated_data)
        stored = service_call(
            lambda: services.job_result_store(
                agent=self.agent(request), job_id=job_id, attempt=data["attempt"], result=data
            )
        )
        return Response({"stored": stored})
