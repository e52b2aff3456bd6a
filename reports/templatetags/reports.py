"""Template filters of the site reports."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from reports.rendering import markdown_render

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    """Markdown to sanitised HTML (see reports.rendering)."""
    return markdown_render(text or "")
