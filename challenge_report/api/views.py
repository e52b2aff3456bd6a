"""The challenge report API: GET /api/v1/challenges/SLUG/report/?format=json|html|pdf|md, the report as it is now
for the caller (what the access policy lets it read). Errors are JSON whatever the format asked for."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from challenges.selectors import challenge_for
from sites.permissions import PlanPermission

from ..render import FORMATS
from ..responses import report_response
from ..selectors import FormatError, format_checked, report_now

FORMAT_PARAMETER = OpenApiParameter(
    "format",
    str,
    enum=list(FORMATS),
    description="json (default): the structured content every other format is rendered from; html: one "
    "self-contained file, figures inline; pdf: that HTML as A4 pages; md: a zip of report.md and figures/*.png",
)
REPORT_RESPONSES: dict[Any, Any] = {
    (200, "application/json"): OpenApiResponse(
        OpenApiTypes.OBJECT,
        description="the report's content: introduction, experiments (targets: the rates API's rows), "
        "central_services, sites, timeline, network, lessons, summary, definitions, figures (their data)",
    ),
    (200, "text/html"): OpenApiResponse(OpenApiTypes.STR, description="the report as one HTML file"),
    (200, "application/pdf"): OpenApiResponse(OpenApiTypes.BINARY, description="the report as a PDF"),
    (200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="report.md and figures/*.png"),
    400: OpenApiResponse(description='{"format": ["format must be one of json, html, pdf, md, ..."]}'),
    404: OpenApiResponse(description="no such challenge (or none the caller may read)"),
}


class JsonOnlyNegotiation(APIView):
    """An API view whose `format` query parameter chooses what it renders itself, not DRF's renderer: its own
    answers are plain responses, its errors JSON."""

    renderer_classes = [JSONRenderer]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[Any, str]:
        return JSONRenderer(), "application/json"

    def format_of(self, request: Request) -> str:
        try:
            return format_checked(request.query_params.get("format"))
        except FormatError as error:
            raise ValidationError({"format": [str(error)]}) from error


class ChallengeReportView(JsonOnlyNegotiation):
    """The challenge report as it is now."""

    permission_classes = [PlanPermission]

    @extend_schema(operation_id="challenges_report", parameters=[FORMAT_PARAMETER], responses=REPORT_RESPONSES)
    def get(self, request: Request, slug: str) -> HttpResponse:
        format = self.format_of(request)
        challenge = challenge_for(slug=slug, user=request.user)
        return report_response(report_now(challenge=challenge, user=request.user, format=format))
