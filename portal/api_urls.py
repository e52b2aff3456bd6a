"""The /api/v1/ root: each app adds its router here as it gains an API."""

from django.urls import include, path

from . import views

urlpatterns = [
    path("status/", views.StatusView.as_view(), name="api-status"),
    path("", include("sites.api.urls")),
    path("", include("challenges.api.urls")),
    path("", include("runs.api.urls")),
    path("", include("runs.agents.api.urls")),
    path("", include("sweeps.api.urls")),
    path("", include("live.api.urls")),
    path("", include("results.api.urls")),
    path("", include("reports.api.urls")),
    path("", include("challenge_report.api.urls")),
    path("", include("ingest.api.urls")),
    path("", include("live.api.alerts.urls")),
]
