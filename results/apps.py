from django.apps import AppConfig


class ResultsConfig(AppConfig):
    name = "results"

    def ready(self) -> None:
        from .signals import signals_connect

        signals_connect()
