from django.apps import AppConfig
from django.contrib.admin.apps import AdminConfig


class PortalConfig(AppConfig):
    """The project package as an app, for its management commands (load_demo). It has no models."""

    name = "portal"


class PortalAdminConfig(AdminConfig):
    """django.contrib.admin with the portal's admin site (coordinators only)."""

    default_site = "portal.admin.PortalAdminSite"
