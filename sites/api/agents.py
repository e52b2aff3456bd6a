"""Sites' agents for coordinators (`/api/v1/agents/`): list them with what they last said, enrol one (its
configuration, key included, is in the answer and nowhere else), rotate its key, revoke it. Who may: the access
policy's "manage" (coordinators). An agent's own API is runs.agents.api."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from common.fields import StrictCharField
from common.services import service_call
from sites.agents import agent_config, agent_enroll, agent_revoke, agent_rotate
from sites.models import Site, SiteAgent
from sites.permissions import IsCoordinator


class SiteAgentSerializer(serializers.ModelSerializer[SiteAgent]):
    site = serializers.SlugRelatedField[Site](slug_field="name", read_only=True)

    class Meta:
        model = SiteAgent
        fields = [
            "id",
            "site",
            "name",
            "prefix",
            "created",
            "rotated",
            "revoked",
            "version",
            "kinds",
            "in_flight",
            "last_seen",
        ]
        read_only_fields = fields


class EnrolSerializer(serializers.Serializer[Any]):
    site = serializers.SlugRelatedField[Site](slug_field="name", queryset=Site.objects.all())
    name = StrictCharField(max_length=64, default="agent")
    portal_url = serializers.URLField(max_length=500, help_text="the portal as the site reaches it, https://...")
    ca_bundle = StrictCharField(max_length=500, default="", allow_blank=True)


class RotateSerializer(serializers.Serializer[Any]):
    portal_url = serializers.URLField(max_length=500, help_text="the portal as the site reaches it, https://...")


class ConfigSerializer(serializers.Serializer[Any]):
    """The agent's configuration file, as `manage.py agent_enroll` writes it (its key is shown only here)."""

    agent = SiteAgentSerializer()
    config = serializers.DictField()


class SiteAgentViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[SiteAgent]):
    """Sites' agents: coordinators only."""

    queryset = SiteAgent.objects.none()
    serializer_class = SiteAgentSerializer
    permission_classes = [IsCoordinator]

    def get_queryset(self) -> QuerySet[SiteAgent]:
        return SiteAgent.objects.select_related("site").order_by("site__name", "name", "id")

    @extend_schema(request=EnrolSerializer, responses={201: ConfigSerializer})
    def create(self, request: Request) -> Response:
        """Enrol an agent for a site: the answer holds its configuration, key included (shown only now)."""
        enrol = EnrolSerializer(data=request.data, context={"request": request})
        enrol.is_valid(raise_exception=True)
        data = enrol.validated_data
        agent, key = service_call(lambda: agent_enroll(site=data["site"], name=data["name"]))
        config = agent_config(agent=agent, key=key, portal_url=data["portal_url"], ca_bundle=data["ca_bundle"])
        return Response({"agent": SiteAgentSerializer(agent).data, "config": config}, status=status.HTTP_201_CREATED)

    @extend_schema(request=RotateSerializer, responses=ConfigSerializer)
    @action(detail=True, methods=["post"])
    def rotate(self, request: Request, pk: str) -> Response:
        """A new key (the old one stops working now), in a new configuration."""
        rotate = RotateSerializer(data=request.data, context={"request": request})
        rotate.is_valid(raise_exception=True)
        agent = self.get_object()
        key = service_call(lambda: agent_rotate(agent=agent))
        config = agent_config(agent=agent, key=key, portal_url=rotate.validated_data["portal_url"])
        return Response({"agent": SiteAgentSerializer(agent).data, "config": config})

    @extend_schema(request=None, responses=SiteAgentSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        """Its key stops working now; the site's work goes to a Celery queue again."""
        agent = self.get_object()
        agent_revoke(agent=agent)
        return Response(SiteAgentSerializer(agent).data)
