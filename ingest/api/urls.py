"""Ingestion API routes under /api/v1/ingest/."""

from django.urls import path

from . import views

urlpatterns = [
    path("ingest/fts/", views.FtsIngestView.as_view(), name="ingest-fts"),
    path("ingest/fts-optimizer/", views.FtsOptimizerIngestView.as_view(), name="ingest-fts-optimizer"),
    path("ingest/rucio/", views.RucioIngestView.as_view(), name="ingest-rucio"),
    path("ingest/perfsonar/", views.PerfsonarIngestView.as_view(), name="ingest-perfsonar"),
]
