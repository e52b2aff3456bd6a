"""The link panel over the API: GET /api/v1/challenges/SLUG/links/."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from challenges.selectors import challenges_visible
from sites.permissions import PlanPermission

from ..links import challenge_links
from .link_serializers import LinkPanelSerializer


class LinkPanelView(APIView):
    """Every link of the challenge: rates against its target, FTS's latest optimizer decision, what limits it, and
    its last hour's failures by FTS's category, scope and phase."""

    permission_classes = [PlanPermission]

    @extend_schema(operation_id="challenges_links", responses=LinkPanelSerializer)
    def get(self, request: Request, slug: str) -> Response:
        challenge = get_object_or_404(challenges_visible(user=request.user), slug=slug)
        return Response(LinkPanelSerializer(challenge_links(challenge=challenge, user=request.user)).data)
