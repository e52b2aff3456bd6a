"""The public links of report snapshots, /shared/reports/KEY/: no account needed, revocable."""

from django.urls import path

from . import views

urlpatterns = [
    path("reports/<str:key>/", views.shared_report, name="report-shared"),
]
