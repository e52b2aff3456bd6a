"""Top-level URLs: pages, the admin, login, and the API under /api/v1/ with its schema and docs."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from . import views
from .metrics import metrics_view

# Under /api/ every error is JSON, those Django answers itself too (a URL no route takes, a 500 no view caught).
handler400 = "portal.views.bad_request"
handler403 = "portal.views.permission_denied"
handler404 = "portal.views.page_not_found"
handler500 = "portal.views.server_error"

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    # Browsers ask for /favicon.ico whatever the page says: the portal's icon, not a 404 on every page.
    path("favicon.ico", views.favicon),
    path("challenges/", include("runs.urls")),
    path("challenges/", include("challenges.urls")),
    path("challenges/", include("live.urls")),
    path("challenges/", include("challenge_report.urls")),
    path("shared/", include("challenge_report.public_urls")),
    path("sites/", include("sites.urls")),
    path("sweeps/", include("sweeps.urls")),
    path("results/", include("results.urls")),
    path("results/", include("results.matrix.urls")),
    path("reports/", include("reports.urls")),
    path("ingest/", include("ingest.urls")),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(extra_context={"oidc_enabled": settings.OIDC_ENABLED}),
        name="login",
    ),
    path("tokens/", include("sites.token_urls")),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("portal.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
]

if settings.OIDC_ENABLED:
    urlpatterns.append(path("oidc/", include("mozilla_django_oidc.urls")))
