"""The link panel over the API: GET /api/v1/challenges/SLUG/links/."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from challenges.selectors import challenge_for
from sites.permissions import PlanPermission

from ..links import challenge_links
from .link_serializers import LinkPanelSerializer


class LinkPanelView(APIView):
    """Every link of the challenge: rates against its target, FTS's latest optimizer decision, what limits it, and
    its last hour's failures by FTS's category, scope and phase."""

    permission_classes = [PlanPermission]

    @extend_schema(operation_id="challenges_links", responses=LinkPanelSerializer)
    def get(self, request: Request, slug: str) -> Response:
        challenge = challenge_for(slug=slug, user=request.user)
        return Response(LinkPanelSerializer(challenge_links(challenge=challenge, user=request.user)).data)
