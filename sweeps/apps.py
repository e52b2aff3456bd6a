from django.apps import AppConfig


class SweepsConfig(AppConfig):
    """Sweeps: links x modes x concurrencies (and iperf3 + path MTU per link) run one step at a time as runs."""

    name = "sweeps"

    def ready(self) -> None:
        from . import signals  # noqa: F401  (a step's run's end, runs.signals, to the sweep's next step)
