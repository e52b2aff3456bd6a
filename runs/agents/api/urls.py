"""The agents' API routes under /api/v1/agent/."""

from django.urls import path

from . import views

urlpatterns = [
    path("agent/jobs/claim/", views.ClaimView.as_view(), name="agent-jobs-claim"),
    path("agent/jobs/<int:job_id>/result/", views.ResultView.as_view(), name="agent-job-result"),
    path("agent/heartbeat/", views.HeartbeatView.as_view(), name="agent-heartbeat"),
]
