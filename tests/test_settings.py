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
