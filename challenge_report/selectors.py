"""Reads of the challenge report: the report as it is now, in a format, for a reader (the access policy decides
what of the challenge it holds: a DDM service's report holds its experiment's part only)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from challenges.models import Challenge

from .content import content_json, report_content
from .render import CONTENT_TYPES, EXTENSIONS, FORMATS, report_render


class FormatError(ValueError):
    """A format the report is not rendered in."""


@dataclass(frozen=True)
class RenderedReport:
    body: bytes
    content_type: str
    filename: str


def format_checked(value: str | None) -> str:
    """The format asked for (json when none), or FormatError naming the ones there are."""
    chosen = (value or "json").strip().lower()
    if chosen not in FORMATS:
        raise FormatError(f"format must be one of {', '.join(FORMATS)}, not {str(value)[:40]!r}")
    return chosen


def rendered(*, content: dict[str, Any], format: str, name: str) -> RenderedReport:
    """The content (JSON values) in `format`, with its content type and the file name it downloads as."""
    return RenderedReport(report_render(content, format=format), CONTENT_TYPES[format], f"{name}.{EXTENSIONS[format]}")


def report_now(*, challenge: Challenge, user: Any, format: str, now: datetime | None = None) -> RenderedReport:
    """The report of the challenge as it is now (figures at the last whole minute), for `user`."""
    content = content_json(report_content(challenge=challenge, user=user, now=now))
    return rendered(content=content, format=format, name=f"{challenge.slug}-report")
