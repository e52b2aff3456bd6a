"""The demo: a coordinator account to log in with, and the local testbed's sites in the registry."""

from __future__ import annotations

import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from sites.choices import Role
from sites.documents import sites_document_load
from sites.roles import membership_grant
from sites.services import ImportSummary, sites_import


def demo_password() -> str:
    """The demo password, generated once into DEMO_PASSWORD_FILE so that no password lives in the repo."""
    path = Path(settings.DEMO_PASSWORD_FILE)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


def demo_user_ensure() -> tuple[str, str]:
    """Create or refresh the demo account (a coordinator, staff for the admin) and return its login."""
    username, password = settings.DEMO_USERNAME, demo_password()
    user, _ = get_user_model().objects.get_or_create(username=username)
    user.is_staff = True
    user.set_password(password)
    user.save()
    membership_grant(user=user, role=Role.COORDINATOR)
    return username, password


def demo_sites_load() -> ImportSummary | None:
    """Import the sites document the running testbed wrote (None when the testbed never ran here)."""
    path = Path(settings.TESTBED_DIR) / "sites.json"
    if not path.exists():
        return None
    return sites_import(document=sites_document_load(text=path.read_text()))
