"""Coordinators hold every model permission, so the Django admin is theirs without per-model grants."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend

from .roles import user_may


class CoordinatorPermissionBackend(BaseBackend):
    """Grants nothing at login; answers has_perm/has_module_perms with True for active coordinators."""

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return user_may(user=user_obj, action="manage")

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return user_may(user=user_obj, action="manage")
