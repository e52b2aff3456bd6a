"""What a probe reports for each file it moved, staged, read or wrote: plain data, no Django.

Dispatch (challenges/tasks.py) turns every FileOutcome into a results.TransferRecord of its run, so a probe says
what really happened: the bytes, the real start and end of the operation (never the submission time), success or
gfal2's own error message, and the mode gfal2 actually used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any


def utcnow() -> datetime:
    return datetime.now(UTC)


# Where a recall can find a file before it asks for it, on disk already (Tape REST localities): nothing of it comes
# from tape.
ONLINE_BEFORE = ("DISK", "DISK_AND_TAPE")


@dataclass
class FileOutcome:
    """One file's operation. `mode` is what was done: pull, push, streamed, native (XRootD TPC), stage, read,
    write; `details` holds what is particular to the probe (queue and stage time, throughput, gfal2 events...)."""

    source_url: str
    destination_url: str
    bytes: int
    start: datetime
    end: datetime
    ok: bool
    error: str = ""
    mode: str = ""
    checksum: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return max((self.end - self.start).total_seconds(), 0.0)

    @property
    def rate(self) -> float | None:
        """bytes per second over [start, end), None when the file failed or took no time."""
        return self.bytes / self.seconds if self.ok and self.seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["start"], data["end"] = self.start.isoformat(), self.end.isoformat()
        return data


def outcome_from_dict(data: dict[str, Any]) -> FileOutcome:
    """The outcome `FileOutcome.to_dict` wrote (a site's agent sends its outcomes so); KeyError or ValueError for
    a dict that is not one."""
    return FileOutcome(
        source_url=str(data["source_url"]),
        destination_url=str(data["destination_url"]),
        bytes=int(data["bytes"]),
        start=_aware(datetime.fromisoformat(str(data["start"]))),
        end=_aware(datetime.fromisoformat(str(data["end"]))),
        ok=bool(data["ok"]),
        error=str(data.get("error") or ""),
        mode=str(data.get("mode") or ""),
        checksum=str(data.get("checksum") or ""),
        details=dict(data.get("details") or {}),
    )


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
