"""The admin site: open to coordinators (staff flag or not), closed to everyone else."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from sites.roles import user_may


class PortalAdminSite(admin.AdminSite):
    site_header = "Data Challenge Portal administration"
    site_title = "Data Challenge Portal"

    def has_permission(self, request: HttpRequest) -> bool:
        return user_may(user=request.user, action="manage")
