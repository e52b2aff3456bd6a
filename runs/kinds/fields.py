"""How a kind's parameters are checked: every problem collected by field (`Problems`) and raised at once as a
ValidationError whose messages say the field and the reason; the checks of a whole number, a storage URL the
workers speak, a list of them and a true/false."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

from ..dispatch import worker_schemes


class Problems:
    """The problems of one set of parameters, by field."""

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def add(self, field: str, message: str) -> None:
        self.errors.setdefault(field, []).append(message)

    def raise_any(self) -> None:
        if self.errors:
            raise ValidationError(self.errors)


def integer(
    problems: Problems, parameters: dict[str, Any], name: str, default: int | None, *, low: int, high: int
) -> int | None:
    """parameters[name] (or `default`) as a whole number from low to high, else a problem and None."""
    value = parameters.get(name, default)
    if value is None:
        problems.add(name, f"{name} is required (a whole number from {low} to {high})")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(name, f"{name} must be a whole number, not {value!r}")
        return None
    if not low <= value <= high:
        problems.add(name, f"{name} must be from {low} to {high}, not {value}")
        return None
    return value


def url(problems: Problems, field: str, value: Any) -> str | None:
    """A storage URL of a scheme the workers speak, else a problem."""
    if not isinstance(value, str) or "://" not in value:
        problems.add(field, f"not a storage URL: {value!r}")
        return None
    scheme = urlsplit(value).scheme.lower()
    if scheme not in worker_schemes():
        spoken = ", ".join(sorted(worker_schemes()))
        problems.add(field, f"the workers cannot speak {scheme}:// ({value}); their gfal2 speaks {spoken}")
        return None
    if scheme == "file" and not settings.SITES_ALLOW_FILE_ENDPOINTS:
        problems.add(field, f"file:// URLs are allowed only on a testbed ({value})")
        return None
    return value


def urls(problems: Problems, field: str, value: Any, *, what: str) -> list[str | None]:
    """A non-empty list of storage URLs (`what` says which, in the message)."""
    if not isinstance(value, list) or not value:
        problems.add(field, f"{field} must be a non-empty list of {what}")
        return []
    return [url(problems, field, item) for item in value]


def boolean(problems: Problems, parameters: dict[str, Any], name: str, default: bool) -> bool:
    value = parameters.get(name, default)
    if not isinstance(value, bool):
        problems.add(name, f"{name} must be true or false, not {value!r}")
    return value


def choice(problems: Problems, parameters: dict[str, Any], name: str, default: str, *, allowed: tuple[str, ...]) -> str:
    value = parameters.get(name, default)
    if value not in allowed:
        problems.add(name, f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value
