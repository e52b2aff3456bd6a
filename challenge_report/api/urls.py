"""The challenge report's API routes under /api/v1/."""

from django.urls import path

from . import views

urlpatterns = [
    path("challenges/<slug:slug>/report/", views.ChallengeReportView.as_view(), name="challenge-report"),
]
