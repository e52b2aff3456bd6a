"""The settings contract: every variable the code reads is documented in .env.example."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_environment_variable_read_is_listed_in_env_example() -> None:
    read: set[str] = set()
    for source in ("portal/settings.py", "portal/devstack.py"):
        text = (ROOT / source).read_text()
        read |= set(re.findall(r'env(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]+)"', text))
        read |= set(re.findall(r'os\.environ(?:\.get)?[\[(]\s*"([A-Z][A-Z0-9_]+)"', text))
    read -= {"DJANGO_SETTINGS_MODULE", "USER"}
    documented = set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.MULTILINE))
    assert read, "the pattern found no variables: the test would pass vacuously"
    assert read - documented == set()


def test_the_production_profile_passes_the_deployment_checks_with_no_warning() -> None:
    import os
    import secrets
    import subprocess
    import sys

    # A browser test's session flag (DJANGO_ALLOW_ASYNC_UNSAFE) is an error under --deploy: this is the
    # production environment, not the test runner's.
    env = {
        **{key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_ENV": "production",
        "DEBUG": "false",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "portal.example.org",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_the_development_profile_is_what_the_deployment_checks_warn_about() -> None:
    """The check above can fail: without the profile, check --deploy finds what production must not have."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DJANGO_ENV": "development", "ALLOWED_HOSTS": "portal.example.org"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "security.W004" in done.stdout + done.stderr  # no HSTS
