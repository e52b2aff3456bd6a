"""Filters of the report's templates: its content is JSON (times as ISO 8601 strings)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter
def when(value: Any) -> str:
    """An ISO 8601 time (or a datetime) as "2022-03-14 05:00" (UTC); an em dash when there is none."""
    if not value:
        return "—"
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return f"{moment:%Y-%m-%d %H:%M}"


@register.filter
def pairs(value: dict[str, Any] | None) -> str:
    """{"destination": 3} as "destination: 3"; an em dash when empty."""
    return ", ".join(f"{key}: {count}" for key, count in (value or {}).items()) or "—"


@register.filter
def item(value: dict[str, Any] | None, key: str) -> Any:
    """value[key] (None when absent): a figure's data URI or title by its name."""
    return (value or {}).get(key)


@register.filter
def css_string(value: Any) -> SafeString:
    """Text for a CSS string in double quotes (a page's running head): backslash, quote, newline and "<" escaped
    the CSS way, so nothing ends the string or the style element."""
    escapes = {"\\": "\\5c ", '"': "\\22 ", "\n": "\\a ", "<": "\\3c ", ">": "\\3e ", "&": "\\26 "}
    return mark_safe("".join(escapes.get(char, char) for char in str(value)))  # every special character escaped
