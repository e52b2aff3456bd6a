"""A copy whose bytes have all arrived but whose gfal2 call does not return: its destination is checked instead.
Plain Python, no Django.

Measured on the testbed (docs/testbed.md, "A copy that moved every byte and did not return"): XRootD 5.5.3's
queue of checksum jobs can lose a job, and gfal2's native XRootD copy then waits in XrdCl for the destination's
checksum (its end-to-end comparison) although the third-party copy ended and the file is whole; a later question
for the same file's checksum waits as long. The stall guard stopped such a copy 120 s later and the file was copied
again. Now, `arrived_grace` seconds after gfal2 reported all of a copy's bytes, the probe looks at the destination:
its size, then its checksum (its server's, or when that does not come within SERVER_CHECKSUM_WITHIN s, the ADLER32
of its bytes read back through gfal2) against the source's or the expected one. The same file is a finished copy;
anything else (another size or checksum, no answer within ARRIVED_CHECK s) is a stalled try, tried again at once.

The call is left to gfal2 in its thread and not cancelled when the destination is right: gfal2's XRootD plugin
deletes the destination when a copy call fails (gfal_xrootd_copy_cleanup), so a cancel that took effect would
delete the file just found whole. Nothing of the abandoned call reaches the caller: its outcome is this one.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

from .outcomes import FileOutcome, utcnow
from .stall import STALLED, Abandoned, call_within

ARRIVED_GRACE = 5.0  # seconds a copy that reported all its bytes may take to return before its destination is looked at
# Seconds the destination's size and checksums may take: with the grace and the guard's look (every second at most),
# a copy whose bytes have all arrived has ended within 15 s.
ARRIVED_CHECK = 8.0
SERVER_CHECKSUM_WITHIN = 3.0  # seconds the destination's server has to give its checksum before the bytes are read
READ_CHUNK = 8 * 1024 * 1024


def checksums_same(one: str, other: str) -> bool:
    """Two checksums in hex, equal as numbers (servers differ in leading zeros and case)."""
    try:
        return int(one, 16) == int(other, 16)
    except ValueError:
        return one.strip().lower() == other.strip().lower()


def destination_problem(
    ctx: Any, source_url: str, destination_url: str, *, size: int, checksum: str, expected: str, within: float
) -> tuple[str, str, str]:
    """(problem, checksum, how): why the destination is not a whole copy of the source ("" when it is: `size` bytes
    and, unless `checksum` is "none", the source's checksum or `expected`), the destination's checksum, and how it
    was had ("server", or "read back": the server's answer did not come within SERVER_CHECKSUM_WITHIN s, the
    destination's bytes were read through gfal2 and summed here). Each look gets what is left of `within` seconds;
    one that does not answer in time is a problem too."""
    ends = time.monotonic() + within

    def left() -> float:
        return ends - time.monotonic()

    try:
        found = int(call_within(lambda: ctx.stat(destination_url), left()).st_size)
        if found != size:
            return f"the destination holds {found} of {size} bytes", "", ""
        if not checksum or checksum.lower() == "none":
            return "", "", ""
        wanted = expected or str(call_within(lambda: ctx.checksum(source_url, checksum), left()))
        there, how = _destination_checksum(ctx, destination_url, checksum, left)
    except Abandoned as exc:
        return f"the destination could not be checked within {within:.0f} s ({exc})", "", ""
    except Exception as exc:  # gfal2.GError: the destination missing, or its server refusing the look
        return f"the destination could not be checked: {getattr(exc, 'message', '') or exc}", "", ""
    if not checksums_same(wanted, there):
        return f"source {checksum} {wanted}, destination {there} ({how})", there, how
    return "", there, how


def _destination_checksum(ctx: Any, url: str, checksum: str, left: Callable[[], float]) -> tuple[str, str]:
    """(checksum, how) of the destination: its server's, or (ADLER32 only) the sum of its bytes read back when the
    server does not answer in time. The server's question is left behind unanswered (measured: a checksum job lost
    by the server also holds every later question about the same file), its thread to XrdCl's request timeout."""
    try:
        return str(call_within(lambda: ctx.checksum(url, checksum), min(SERVER_CHECKSUM_WITHIN, left()))), "server"
    except Abandoned:
        if checksum.upper() != "ADLER32":
            raise
    stop = threading.Event()
    try:
        return call_within(lambda: _adler32_read(ctx, url, stop), left()), "read back"
    finally:
        stop.set()  # a read that ran out of time stops at its next chunk


def _adler32_read(ctx: Any, url: str, stop: threading.Event) -> str:
    value = 1
    handle = ctx.open(url, "r")
    while not stop.is_set() and (chunk := handle.read_bytes(READ_CHUNK)):
        value = zlib.adler32(chunk, value)
    return f"{value & 0xFFFFFFFF:08x}"


def arrived_outcome(
    ctx: Any, urls: tuple[str, str], look: dict[str, Any], *, start: Any, mode: str, details: dict[str, Any]
) -> FileOutcome:
    """The outcome of a copy whose `size` bytes all arrived and whose call had not returned `grace` s later: done
    when the destination is the source's whole copy, else a stalled try (runs.engine tries it again), its context
    cancelled as the stall guard does (the destination is not the file: whatever still writes it may stop). `look`:
    the copy's size, checksum (algorithm), expected (checksum, or ""), grace (seconds)."""
    (source_url, destination_url), size, checksum = urls, int(look["size"]), str(look["checksum"])
    expected, grace = str(look["expected"]), float(look["grace"])
    began = utcnow()
    problem, there, how = destination_problem(
        ctx, source_url, destination_url, size=size, checksum=checksum, expected=expected, within=ARRIVED_CHECK
    )
    end = utcnow()
    details["arrived"] = {
        "grace": grace,
        "checked_seconds": round((end - began).total_seconds(), 3),
        "checksum_by": how,
        "problem": problem,
    }
    if not problem:
        details["call"] = f"abandoned: it had not returned {grace:.0f} s after all {size} bytes arrived"
        return FileOutcome(source_url, destination_url, size, start, end, True, "", mode, there, details)
    threading.Thread(target=ctx.cancel, name="gfal2-cancel", daemon=True).start()
    details.update(cause=STALLED, errno=None, cancelled=False)
    error = (
        f"{STALLED}: all {size} bytes arrived but the copy had not returned {grace:.0f} s later, and its destination "
        f"is not the source's copy ({problem}), so the portal stopped it"
    )
    return FileOutcome(source_url, destination_url, 0, start, end, False, error=error, mode=mode, details=details)
