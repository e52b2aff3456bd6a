from django.apps import AppConfig


class ResultsConfig(AppConfig):
    """What was measured: transfer records, rollups, rates, matrices, failure causes, figures."""

    name = "results"

    def ready(self) -> None:
        from .signals import signals_connect

        signals_connect()
