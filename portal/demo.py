"""The demo: an account to log in with (and, as the registry and the clock land, the testbed's sites and a
small challenge)."""

from __future__ import annotations

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model


def demo_password() -> str:
    """The demo password, generated once into DEMO_PASSWORD_FILE so that no password lives in the repo."""
    path = Path(settings.DEMO_PASSWORD_FILE)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


def demo_user_ensure() -> tuple[str, str]:
    """Create or refresh the demo account (a staff user) and return its username and password."""
    username, password = settings.DEMO_USERNAME, demo_password()
    user, _ = get_user_model().objects.get_or_create(username=username)
    user.is_staff = True
    user.set_password(password)
    user.save()
    return username, password
