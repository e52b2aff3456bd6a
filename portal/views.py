"""Project-level pages: home and health, and the API status."""

from __future__ import annotations

import sys
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.utils import timezone
from django.views.defaults import server_error as django_server_error
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from challenges.selectors import challenges_visible

from . import health
from .api_errors import DATABASE_AWAY, DATABASE_AWAY_RETRY_AFTER, database_away


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The landing page: what the portal is for and whether its services answer."""
    now = timezone.now()
    running = challenges_visible(user=request.user).filter(start__lte=now, end__gt=now).order_by("end")
    return render(request, "home.html", {"health": health.portal_health(), "running": running})


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500 handler: an error that reached no view's handler. The database going away (a restart) is no
    bug of ours: 503 with Retry-After, JSON for the API; anything else is the plain 500 page."""
    if not database_away(sys.exc_info()[1]):
        return django_server_error(request)
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"detail": DATABASE_AWAY}, status=503)
    else:
        response = HttpResponse(
            "The portal's database is not answering right now (restarting?). Try again in a few seconds.",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    response["Retry-After"] = str(DATABASE_AWAY_RETRY_AFTER)
    return response


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for whatever a page says: the portal's icon (its URL asked of the static
    files storage when asked, so that a hashed name of a manifest storage would be found too)."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


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
