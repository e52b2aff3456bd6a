"""What the site report tests share: the challenge's clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2022, 3, 7, tzinfo=UTC)


def at(hours: float) -> datetime:
    """The challenge's start plus `hours`."""
    return T0 + timedelta(hours=hours)
