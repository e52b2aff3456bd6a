from django.apps import AppConfig


class IngestConfig(AppConfig):
    """Ingestion of the transfer records of experiment DDM systems (FTS, Rucio) and perfSONAR results."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "ingest"
