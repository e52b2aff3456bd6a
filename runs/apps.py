from django.apps import AppConfig


class RunsConfig(AppConfig):
    """The tests the portal runs itself: runs, their files, the engine, the reaper and the probes."""

    name = "runs"
