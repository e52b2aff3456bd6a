"""When a record may have happened: the bounds every ingested record's times are held to (the one place of them),
and the reasons given to the sender of a record outside them, saying what was probably wrong."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from .errors import ItemError

# A record's bytes are spread over every minute of [start, end) in the rollups: times decades apart (a zero or a
# garbled timestamp) would make millions of rollup rows out of one message. No file transfer lasts a week.
MAX_TRANSFER_DAYS = 7
# A record ends no earlier than 2000 (no grid transfer is older: an earlier end is a zero, or a time in the wrong
# unit) and no more than a little ahead of the portal's clock (a sender's clock may run a bit fast; more is a wrong
# time, which would count for minutes that have not come yet). Neither would count for any activity: it would only
# hide the sender's mistake, so the item is refused and the sender told why.
RECORDS_FROM = datetime(2000, 1, 1, tzinfo=UTC)
RECORDS_AHEAD = timedelta(minutes=10)


def utc_text(moment: datetime) -> str:
    """A time as the reasons show it: ISO 8601 UTC to the second, "1970-01-20T16:13:20Z"."""
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def ms_text(value: float) -> str:
    """Epoch milliseconds as the sender wrote them, without the ".000000" of old FTS versions."""
    return str(int(value)) if value.is_integer() else repr(value)


def span_text(seconds: float) -> str:
    """A span in its largest whole unit, rounded: "30 days", "2 hours", "11 minutes"."""
    for unit, size in (("day", 86400), ("hour", 3600)):
        if seconds >= size:
            count = round(seconds / size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    count = max(1, round(seconds / 60))
    return f"{count} minute{'s' if count != 1 else ''}"


def duration_check(seconds: float) -> None:
    """A transfer lasting more than MAX_TRANSFER_DAYS: its times are wrong."""
    if seconds > MAX_TRANSFER_DAYS * 86400:
        raise ItemError(
            f"the transfer lasts {seconds / 86400:.6g} days: more than {MAX_TRANSFER_DAYS}, its times are wrong"
        )


def order_check(
    start: datetime, end: datetime, start_name: str, end_name: str, sent: tuple[float, float] | None = None
) -> None:
    """A record that ends before it starts; the fields by their names, sent: their values when the message has them
    in epoch milliseconds (shown so, else as times)."""
    if end < start:
        start_text, end_text = (ms_text(sent[0]), ms_text(sent[1])) if sent else (utc_text(start), utc_text(end))
        raise ItemError(
            f"{end_name} {end_text} is before {start_name} {start_text}: the transfer ends before it starts"
        )


def end_check(end: datetime, name: str, sent: float | None = None) -> None:
    """A record that ends before RECORDS_FROM, or more than RECORDS_AHEAD ahead of the portal's clock now, with what
    was probably wrong; name: the field of the end, sent: its value when the message has it in epoch milliseconds.
    Every record passes here: the reason is only written for one that fails."""
    if end < RECORDS_FROM:
        if end.timestamp() == 0:
            raise ItemError(f"{_told(end, name, sent)}: a zero time (the sender did not set it)")
        raise ItemError(
            f"{_told(end, name, sent)}: ends before {RECORDS_FROM:%Y-%m-%d}, before any grid transfer"
            " (a wrong time or unit)"
        )
    now = datetime.now(UTC)
    if end > now + RECORDS_AHEAD:
        raise ItemError(
            f"{_told(end, name, sent)}: ends {span_text((end - now).total_seconds())} in the future"
            f" (more than {span_text(RECORDS_AHEAD.total_seconds())} ahead of the portal's clock)"
        )


def _told(end: datetime, name: str, sent: float | None) -> str:
    return f"{name} {ms_text(sent)} is {utc_text(end)}" if sent is not None else f"{name} {utc_text(end)}"


def seconds_check(value: float, moment: datetime, name: str) -> None:
    """A time sent in epoch milliseconds (FTS) that falls before RECORDS_FROM but, read as seconds, would be a time a
    transfer could have: the sender wrote seconds (1700000000 ms is 1970-01-20, 1700000000 s 2023-11-14)."""
    if moment < RECORDS_FROM and RECORDS_FROM.timestamp() <= value <= time.time() + RECORDS_AHEAD.total_seconds():
        raise ItemError(f"{name} {ms_text(value)} is {utc_text(moment)}: looks like seconds, not milliseconds")
