"""Run pages, mounted under /challenges/ beside the plan they run (their addresses predate the runs app)."""

from django.urls import path

from . import views
from .probes import views as probe_views

app_name = "runs"
urlpatterns = [
    path("runs/<int:pk>/", views.run_detail, name="detail"),
    path("runs/<int:pk>/progress/", views.run_progress, name="progress"),
    path("runs/<int:pk>/cancel/", views.run_cancel, name="cancel"),
    path("runs/<int:pk>/copies/delete/", views.run_copies_delete, name="copies_delete"),
    path("<slug:slug>/runs/", views.challenge_runs, name="challenge_runs"),
    path("<slug:slug>/probes/", probe_views.challenge_probes, name="challenge_probes"),
    path("<slug:slug>/activities/<int:pk>/run/", views.activity_run, name="activity_run"),
]
