"""The io probe (the federation benchmark): write a file of random bytes to an endpoint, read it back, time both.

Plain Python with gfal2 (no Django). The write is a gfal2 copy from a local file of random bytes (random, because
compressible fake data flatters some storage), the read streams the file back through gfal2 and checks its ADLER32
against what was written. Each is one FileOutcome with its real start and end.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any

import gfal2

from .outcomes import FileOutcome, utcnow

CHUNK = 4 * 1024 * 1024


def _adler32_hex(value: int) -> str:
    return f"{value & 0xFFFFFFFF:08x}"


def _error_message(exc: Exception) -> str:
    """gfal2's own message (GError.message), else the exception's text."""
    return str(getattr(exc, "message", "") or exc)


def random_local_file(directory: str, size: int) -> tuple[str, str]:
    """A local file of `size` random bytes in directory; returns its path and ADLER32 (8 hex digits)."""
    if size < 0:
        raise ValueError(f"size must be >= 0 bytes, not {size}")
    checksum = 1
    handle, path = tempfile.mkstemp(prefix="io-probe-", dir=directory)
    with os.fdopen(handle, "wb") as stream:
        left = size
        while left:
            chunk = os.urandom(min(CHUNK, left))
            checksum = zlib.adler32(chunk, checksum)
            stream.write(chunk)
            left -= len(chunk)
    return path, _adler32_hex(checksum)


def write_file(ctx: Any, url: str, size: int, *, timeout: int = 300) -> FileOutcome:
    """Write `size` random bytes to url with a gfal2 copy from a local file (overwriting); mode "write".

    The outcome's checksum is the ADLER32 of what was written.
    """
    with tempfile.TemporaryDirectory(prefix="io-probe-") as directory:
        local, checksum = random_local_file(directory, size)
        params = ctx.transfer_parameters()
        params.overwrite = True
        params.create_parent = True
        params.timeout = timeout
        start = utcnow()
        try:
            ctx.filecopy(params, f"file://{local}", url)
        except gfal2.GError as exc:
            return FileOutcome("", url, 0, start, utcnow(), False, _error_message(exc), "write", checksum)
        end = utcnow()
    return FileOutcome("", url, size, start, end, True, mode="write", checksum=checksum)


def read_file(ctx: Any, url: str, *, chunk_size: int = CHUNK, details: dict[str, Any] | None = None) -> FileOutcome:
    """Read url to the end through gfal2 (nothing is stored); mode "read", checksum the ADLER32 of what came.

    A failure keeps gfal2's message and the bytes read up to it.
    """
    checksum, done = 1, 0
    start = utcnow()
    try:
        handle = ctx.open(url, "r")
        while chunk := handle.read_bytes(chunk_size):
            checksum = zlib.adler32(chunk, checksum)
            done += len(chunk)
        del handle  # gfal2-python closes the file when the handle goes
    except gfal2.GError as exc:
        return FileOutcome(url, "", done, start, utcnow(), False, _error_message(exc), "read", details=details or {})
    end = utcnow()
    return FileOutcome(
        url, "", done, start, end, True, mode="read", checksum=_adler32_hex(checksum), details=details or {}
    )


@dataclass
class IoResult:
    """The io probe's result: the write outcome, then the read outcome (absent when the write failed)."""

    endpoint_url: str
    size: int
    files: list[FileOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return len(self.files) == 2 and all(outcome.ok for outcome in self.files)

    @property
    def write_rate(self) -> float | None:
        """Bytes per second of the write, None when it failed."""
        return self.files[0].rate if self.files else None

    @property
    def read_rate(self) -> float | None:
        """Bytes per second of the read, None when it failed or did not happen."""
        return self.files[1].rate if len(self.files) > 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "endpoint_url": self.endpoint_url,
            "size": self.size,
            "ok": self.ok,
            "write_rate": self.write_rate,
            "read_rate": self.read_rate,
            "files": [outcome.to_dict() for outcome in self.files],
        }


def io_probe(ctx: Any, endpoint_url: str, size: int, *, timeout: int = 300, keep: bool = False) -> IoResult:
    """Write a random file of `size` bytes below endpoint_url, read it back and time both.

    The read fails with "checksum mismatch" when what came back is not what was written. The file is deleted
    afterwards unless keep is set.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0 bytes, not {size}")
    url = f"{endpoint_url.rstrip('/')}/io-probe/{uuid.uuid4().hex}-{size}"
    result = IoResult(endpoint_url, size)
    written = write_file(ctx, url, size, timeout=timeout)
    result.files.append(written)
    if not written.ok:
        return result
    read = read_file(ctx, url)
    if read.ok and (read.checksum != written.checksum or read.bytes != size):
        read.ok = False
        read.error = (
            f"checksum mismatch: wrote {size} bytes with ADLER32 {written.checksum}, "
            f"read {read.bytes} bytes with ADLER32 {read.checksum}"
        )
    result.files.append(read)
    if not keep:
        with contextlib.suppress(gfal2.GError):  # the measurement stands; a leftover file is not a failure
            ctx.unlink(url)
    return result


__all__ = ["IoResult", "io_probe", "read_file", "write_file"]
