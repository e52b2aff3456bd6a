"""Problems found by checks that report every broken rule at once: (field, message) pairs."""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError

Problem = tuple[str, str]


def problems_raise(problems: Iterable[Problem]) -> None:
    """Raise one ValidationError with every problem by field; nothing when there is none."""
    errors: dict[str, list[str]] = {}
    for field, message in problems:
        errors.setdefault(field, []).append(message)
    if errors:
        raise ValidationError(errors)
