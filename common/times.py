"""Time as the portal writes it: ISO 8601 in UTC with a Z."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def iso_utc(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC ("2026-11-25T10:00:00Z"); None stays None."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.isoformat().replace("+00:00", "Z")


def iso_values(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its datetimes as ISO 8601 UTC strings and everything else as it is."""
    return {key: iso_utc(value) if isinstance(value, datetime) else value for key, value in row.items()}
