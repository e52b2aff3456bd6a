"""Project-level pages: home and health, and the API status."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from . import health


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The landing page: what the portal is for and whether its services answer."""
    return render(request, "home.html", {"health": health.portal_health()})


def healthz(request: HttpRequest) -> JsonResponse:
    """Unauthenticated liveness for load balancers: 200 when the database and Redis answer, else 503."""
    status = health.portal_health()
    ok = status["database"] == "ok" and status["redis"] == "ok"
    return JsonResponse(status, status=200 if ok else 503)


class StatusView(APIView):
    """The portal's service status: database, Redis, and when the Celery beat heartbeat last ran."""

    @extend_schema(
        responses=inline_serializer(
            "Status",
            {
                "database": serializers.CharField(),
                "redis": serializers.CharField(),
                "last_heartbeat": serializers.DateTimeField(allow_null=True),
            },
        )
    )
    def get(self, request: Request) -> Response:
        data: dict[str, Any] = health.portal_health()
        return Response(data)
