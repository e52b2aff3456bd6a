"""Project-level pages: home and health, and the API status."""

from __future__ import annotations

import sys
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.utils import timezone
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found as django_page_not_found
from django.views.defaults import permission_denied as django_permission_denied
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


def _under_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 400 handler (a request Django itself refuses: too many fields, a bad Host): JSON under /api/."""
    if _under_api(request):
        # The exception's class, not its text: that may echo a header (the Host) back.
        return JsonResponse({"detail": f"a request the server refuses ({type(exception).__name__})"}, status=400)
    return django_bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 403 handler: JSON under /api/ (the API's own views answer their 403s in JSON already)."""
    if _under_api(request):
        return JsonResponse(
            {"detail": str(exception) or "You do not have permission to perform this action."}, status=403
        )
    return django_permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Django's 404 handler: a URL no route takes (a path parameter that is not an id, a route that does not
    exist). Under /api/ the answer is JSON as every other error of the API, so that a client reads it the same way."""
    if _under_api(request):
        return JsonResponse({"detail": "Not found.", "path": f"no API route takes {request.path[:200]}"}, status=404)
    return django_page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500 handler: an error that reached no view's handler. The database going away (a restart) is no
    bug of ours: 503 with Retry-After; anything else is a 500. JSON for the API, pages otherwise."""
    away = database_away(sys.exc_info()[1])
    if _under_api(request):
        detail = DATABASE_AWAY if away else "the server failed on this request (a bug of ours; it is logged)"
        response: HttpResponse = JsonResponse({"detail": detail}, status=503 if away else 500)
    elif away:
        response = HttpResponse(
            "The portal's database is not answering right now (restarting?). Try again in a few seconds.",
            status=503,
            content_type="text/plain; charset=utf-8",
        )
    else:
        return django_server_error(request)
    if away:
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
