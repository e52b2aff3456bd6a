"""Snapshots of the challenge report under /api/v1/challenges/SLUG/report/snapshots/: list and make (POST, the
access policy's "publish"), read one in a format (the bytes stored when it was made), what changed since another,
and its public link (POST makes it, DELETE revokes it)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from challenges.models import Challenge
from challenges.selectors import challenge_for
from common.services import service_call
from common.times import iso_utc
from sites.permissions import PlanPermission

from ..models import ReportSnapshot
from ..responses import report_response
from ..snapshots import snapshot_create, snapshot_publish, snapshot_rendered, snapshots_compare, snapshots_readable
from .views import FORMAT_PARAMETER, REPORT_RESPONSES, JsonOnlyNegotiation

SNAPSHOT_FIELDS = {
    "version": serializers.IntegerField(),
    "author": serializers.CharField(allow_null=True),
    "created_at": serializers.DateTimeField(),
    "at": serializers.DateTimeField(help_text="the minute the report's figures were taken at"),
    "state": serializers.CharField(help_text="the challenge then: not started, running or finished"),
    "pdf_sha256": serializers.CharField(help_text="SHA-256 of the PDF, hex"),
    "public_url": serializers.CharField(allow_null=True, help_text="the link that needs no account; null: none"),
}
SnapshotSerializer = inline_serializer("ReportSnapshot", SNAPSHOT_FIELDS)
SnapshotsSerializer = inline_serializer(
    "ReportSnapshots", {"snapshots": inline_serializer("ReportSnapshot", SNAPSHOT_FIELDS, many=True)}
)


class PublishPermission(PlanPermission):
    """Everyone logged in reads; making a snapshot and sharing it is the access policy's "publish"."""

    write_action = "publish"


NOT_FOUND = OpenApiResponse(description="no such challenge or snapshot (or none the caller may read)")


def snapshot_dict(snapshot: ReportSnapshot) -> dict[str, Any]:
    public = reverse("report-shared", args=[snapshot.public_key]) if snapshot.public_key else None
    return {
        "version": snapshot.version,
        "author": snapshot.author.get_username() if snapshot.author else None,
        "created_at": iso_utc(snapshot.created_at),
        "at": iso_utc(snapshot.at),
        "state": snapshot.state,
        "pdf_sha256": snapshot.pdf_sha256,
        "public_url": public,
    }


def _snapshot(request: Request, slug: str, version: int) -> ReportSnapshot:
    challenge = challenge_for(slug=slug, user=request.user)
    if version >= 2**31:  # no version is that high (and the column could not hold it)
        raise Http404(f"no snapshot {version} of this challenge's report")
    found = snapshots_readable(challenge=challenge, user=request.user).filter(version=version).first()
    if found is None:
        raise Http404(f"no snapshot {version} of this challenge's report")
    return found  # type: ignore[no-any-return]


class SnapshotListView(JsonOnlyNegotiation):
    """The report's snapshots, newest first; POST freezes the report as it is now as the next version."""

    permission_classes = [PublishPermission]

    @extend_schema(
        operation_id="challenges_report_snapshots_list",
        responses={
            200: SnapshotsSerializer,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, slug: str) -> Response:
        challenge = challenge_for(slug=slug, user=request.user)
        snapshots = snapshots_readable(challenge=challenge, user=request.user).order_by("-version")
        return Response({"snapshots": [snapshot_dict(snapshot) for snapshot in snapshots]})

    @extend_schema(
        operation_id="challenges_report_snapshots_create",
        request=None,
        responses={201: SnapshotSerializer, 403: OpenApiResponse(description="only coordinators"), 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str) -> Response:
        challenge: Challenge = challenge_for(slug=slug, user=request.user)
        snapshot = service_call(lambda: snapshot_create(challenge=challenge, user=request.user))
        return Response(snapshot_dict(snapshot), status=status.HTTP_201_CREATED)


class SnapshotView(JsonOnlyNegotiation):
    """One snapshot in a format: the bytes stored when it was made, whatever arrived since."""

    permission_classes = [PublishPermission]

    @extend_schema(operation_id="challenges_report_snapshot", parameters=[FORMAT_PARAMETER], responses=REPORT_RESPONSES)
    def get(self, request: Request, slug: str, version: int) -> HttpResponse:
        format = self.format_of(request)
        return report_response(snapshot_rendered(snapshot=_snapshot(request, slug, version), format=format))


class SnapshotChangesView(JsonOnlyNegotiation):
    """What changed from an earlier snapshot (?since=N, default the one before) to this one: the targets whose
    figures or verdict moved, with both values, and those only one of them holds."""

    permission_classes = [PublishPermission]

    @extend_schema(
        operation_id="challenges_report_snapshot_changes",
        parameters=[
            OpenApiParameter(
                "since",
                {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                description="the earlier version (default: the one before)",
            )
        ],
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description='{"since": N, "version": M, "targets": '
                '[{"id", "activity", "experiment", "where", "change", "figures"}]}',
            ),
            400: OpenApiResponse(description='{"since": ["..."]}'),
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, slug: str, version: int) -> Response:
        later = _snapshot(request, slug, version)
        raw = request.query_params.get("since", "").strip()
        if raw and not (raw.isdigit() and 0 < int(raw) < 2**31):
            raise ValidationError({"since": ["a snapshot's version: a whole number from 1"]})
        since = int(raw) if raw else version - 1
        earlier = _snapshot(request, slug, since) if since >= 1 else None
        if earlier is None:
            raise ValidationError({"since": ["there is no earlier snapshot to compare with"]})
        changes = snapshots_compare(earlier=earlier, later=later)
        return Response({"since": since, "version": version, "targets": changes})


class SnapshotPublicView(JsonOnlyNegotiation):
    """The snapshot's public link: POST makes one (a new one each time), DELETE revokes it (coordinators)."""

    permission_classes = [PublishPermission]

    @extend_schema(
        operation_id="challenges_report_snapshot_publish",
        request=None,
        responses={200: SnapshotSerializer, 403: OpenApiResponse(description="only coordinators"), 404: NOT_FOUND},
    )
    def post(self, request: Request, slug: str, version: int) -> Response:
        snapshot = _snapshot(request, slug, version)
        service_call(lambda: snapshot_publish(snapshot=snapshot, user=request.user, public=True))
        return Response(snapshot_dict(snapshot))

    @extend_schema(
        operation_id="challenges_report_snapshot_revoke",
        responses={200: SnapshotSerializer, 403: OpenApiResponse(description="only coordinators"), 404: NOT_FOUND},
    )
    def delete(self, request: Request, slug: str, version: int) -> Response:
        snapshot = _snapshot(request, slug, version)
        service_call(lambda: snapshot_publish(snapshot=snapshot, user=request.user, public=False))
        return Response(snapshot_dict(snapshot))
