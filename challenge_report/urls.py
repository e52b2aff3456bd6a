"""The challenge report's pages, mounted under /challenges/."""

from django.urls import path

from . import views

app_name = "challenge_report"
urlpatterns = [
    path("<slug:slug>/report/", views.challenge_report_page, name="page"),
    path("<slug:slug>/report/snapshots/<int:version>/share/", views.snapshot_share, name="snapshot-share"),
]
