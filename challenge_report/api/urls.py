"""The challenge report's API routes under /api/v1/."""

from django.urls import path

from . import snapshots, views

SNAPSHOT = "challenges/<slug:slug>/report/snapshots/<int:version>/"
urlpatterns = [
    path("challenges/<slug:slug>/report/", views.ChallengeReportView.as_view(), name="challenge-report"),
    path("challenges/<slug:slug>/report/snapshots/", snapshots.SnapshotListView.as_view(), name="report-snapshots"),
    path(SNAPSHOT, snapshots.SnapshotView.as_view(), name="report-snapshot"),
    path(f"{SNAPSHOT}changes/", snapshots.SnapshotChangesView.as_view(), name="report-snapshot-changes"),
    path(f"{SNAPSHOT}public/", snapshots.SnapshotPublicView.as_view(), name="report-snapshot-public"),
]
