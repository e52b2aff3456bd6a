from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The project package as an app, for its management commands (load_demo). It has no models."""

    name = "portal"
