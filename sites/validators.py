"""Checks shared by the API, the forms and the sites document."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from .choices import ENDPOINT_SCHEMES


def endpoint_url_problem(url: str) -> str | None:
    """Why url cannot be a storage endpoint's base URL, or None when it can."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return f"not a valid URL: {exc}"
    schemes = (*ENDPOINT_SCHEMES, "file") if settings.SITES_ALLOW_FILE_ENDPOINTS else ENDPOINT_SCHEMES
    if parts.scheme not in schemes:
        allowed = ", ".join(schemes)
        hint = "" if parts.scheme != "file" else " (file:// needs SITES_ALLOW_FILE_ENDPOINTS=true)"
        return f"scheme {parts.scheme or '(none)'!r} is not one of {allowed}{hint}"
    if parts.scheme != "file" and not parts.hostname:
        return "the URL has no host name"
    return None
