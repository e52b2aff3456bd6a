"""POST /api/v1/ingest/<format>/: a batch of FTS, Rucio or perfSONAR messages, or of FTS optimizer decisions, as a
JSON array or NDJSON."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sites.permissions import DdmExperimentPermission

from ..services import BodyError, ingest_items, items_from_body
from .serializers import IngestResultSerializer


class _RawBody(BaseParser):
    """Declares the media types the views read themselves (DRF never parses the body)."""

    media_type = "application/json"


class _RawNdjson(_RawBody):
    media_type = "application/x-ndjson"


BATCH_SCHEMA = {"type": "array", "items": {}, "description": "the records of one batch, each an object"}


class IngestView(APIView):
    """One batch in: valid items stored in one transaction, invalid ones listed by index with the reason, a
    retried batch stored nothing twice. A DDM token sends only its own experiment's records."""

    permission_classes = [DdmExperimentPermission]
    parser_classes = [_RawBody, _RawNdjson]
    format = ""

    @extend_schema(
        # A batch is a JSON array (or NDJSON); each item is checked on its own and one that is not a record is
        # listed among the rejected by its index, so the schema takes any item.
        request={"application/json": BATCH_SCHEMA, "application/x-ndjson": OpenApiTypes.STR},
        responses={
            200: IngestResultSerializer,
            400: OpenApiResponse(description="the body is not a JSON array nor NDJSON; nothing stored"),
            413: OpenApiResponse(description="the body is larger than INGEST_MAX_BODY_BYTES; nothing stored"),
        },
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        limit = settings.INGEST_MAX_BODY_BYTES
        too_big = Response(
            {"detail": f"the body is larger than {limit} bytes: send smaller batches"},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            return too_big
        # Read straight from the stream: request.body would refuse anything past DATA_UPLOAD_MAX_MEMORY_SIZE.
        body = request._request.read(limit + 1)
        if len(body) > limit:
            return too_big
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        try:
            ndjson = content_type in ("application/x-ndjson", "application/jsonl")
            items = items_from_body(body, ndjson=ndjson, format=self.format)
        except BodyError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        result = ingest_items(format=self.format, items=items, user=request.user)
        return Response(result.as_dict())


class FtsIngestView(IngestView):
    """FTS3 transfer-complete monitoring messages."""

    format = "fts"


class RucioIngestView(IngestView):
    """Rucio Hermes envelopes (transfer-done, transfer-failed; other event types are counted as skipped)."""

    format = "rucio"


class PerfsonarIngestView(IngestView):
    """perfSONAR pScheduler throughput runs between network hosts."""

    format = "perfsonar"


class FtsOptimizerIngestView(IngestView):
    """FTS optimizer decisions (rows of t_optimizer_evolution): accepted counts new decisions, duplicates those
    already stored. A DDM token sends only its experiment's links, stored with its experiment."""

    format = "fts-optimizer"
