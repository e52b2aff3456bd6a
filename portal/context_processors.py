"""Template context every page needs: whether the user coordinates (the navigation shows their tools)."""

from __future__ import annotations

from django.http import HttpRequest

from sites.roles import user_may


def roles(request: HttpRequest) -> dict[str, bool]:
    user = getattr(request, "user", None)
    return {"is_coordinator": bool(user and user.is_authenticated and user_may(user=user, action="manage"))}
