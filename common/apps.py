from django.apps import AppConfig


class CommonConfig(AppConfig):
    """The ground every app stands on: document parsing, processes, pagination, units, time, table exports.
    It imports no app of the project."""

    name = "common"
    verbose_name = "common ground"
