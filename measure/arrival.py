"""A copy whose bytes have all arrived but whose gfal2 call does not return: its destination is checked instead.
Plain Python, no Django.

Measured on the testbed (docs/testbed.md, "A copy that moved every byte and did not return"): XRootD 5.5.3's
queue of checksum jobs can lose a job, and gfal2's native XRootD copy then waits in XrdCl for the destination's
checksum (its end-to-end comparison) although the third-party copy ended and the file is whole; a later question
for the same file's checksum waits as long. The stall guard stopped such a copy 120 s later and the file was copied
again. Now, `arrived_grace` seconds after gfal2 reported all of a copy's bytes, the probe looks at the destination:
its size, then its checksum (its server's, or when that does not come within SERVER_CHECKSUM_WITHIN s, the ADLER32
of its bytes read back through gfal2) against the source's or the expected one. The same file is a finished copy;
another size or checksum is a stalled try, tried again at once. A look that cannot tell within ARRIVED_CHECK s (a
busy server, a busy machine: measured, with load averages of 12-33 on the 2 cores, 28 of 40 copies returned more
than 5 s after their last byte, and some looks did not answer in 8 s) tries again 10 s later (StallGuard.run's
arrived_again) while the call may still return by itself; the stall guard's own rules stay in force meanwhile.

The call is left to gfal2 in its thread and not cancelled when the destination is right: gfal2's XRootD plugin
deletes the destination when a copy call fails (gfal_xrootd_copy_cleanup), so a cancel that took effect would
delete the file just found whole. Nothing of the abandoned call reaches the caller: its outcome is this one. Left
alone, the call still fails in the end (measured on the testbed: 1,824 s after the last byte, XrdCl's request
timeout of 1,800 s, "Operation expired ... querying the checksum") and gfal2 deletes the destination then: so the
copies a run keeps are not finished this way (runs.tasks gives them no size), and the thread lives that long.
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


def destination_verdict(
    ctx: Any,
    urls: tuple[str, str],
    *,
    size: int,
    checksum: str,
    expected: str,
    within: float,
    ask_server: bool = True,
) -> tuple[bool | None, str, str, str]:
    """(same, problem, checksum, how) of the destination: same is True when it is a whole copy of the source (`size`
    bytes and, unless `checksum` is "none", the source's checksum or `expected`), False when it is not (problem says
    why), None when the looks did not answer within `within` seconds (problem says which); then its checksum, and
    how it was had ("server", or "read back": the server did not answer within SERVER_CHECKSUM_WITHIN s or was not
    asked (`ask_server`), and the destination's bytes were read through gfal2 and summed here)."""
    source_url, destination_url = urls
    ends = time.monotonic() + within

    def left() -> float:
        return ends - time.monotonic()

    try:
        found = int(call_within(lambda: ctx.stat(destination_url), left()).st_size)
        if found != size:
            return False, f"the destination holds {found} of {size} bytes", "", ""
        if not checksum or checksum.lower() == "none":
            return True, "", "", ""
        wanted = expected or str(call_within(lambda: ctx.checksum(source_url, checksum), left()))
        there, how = _destination_checksum(ctx, destination_url, checksum, left, ask_server=ask_server)
    except Abandoned as exc:
        return None, f"the destination could not be checked within {within:.0f} s ({exc})", "", ""
    except Exception as exc:  # gfal2.GError: the destination missing, or its server refusing the look
        return False, f"the destination could not be checked: {getattr(exc, 'message', '') or exc}", "", ""
    if not checksums_same(wanted, there):
        return False, f"source {checksum} {wanted}, destination {there} ({how})", there, how
    return True, "", there, how


def _destination_checksum(
    ctx: Any, url: str, checksum: str, left: Callable[[], float], *, ask_server: bool
) -> tuple[str, str]:
    """(checksum, how) of the destination: its server's, or (ADLER32 only) the sum of its bytes read back when the
    server does not answer in time. The server's question is left behind unanswered (measured: a checksum job lost
    by the server also holds every later question about the same file), its thread to XrdCl's request timeout."""
    if ask_server or checksum.upper() != "ADLER32":
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


class ArrivalLook:
    """The looks at the destination of one copy whose `size` bytes all arrived and whose call had not returned
    `grace` s later, for the stall guard (StallGuard.run's arrived_look): the copy's outcome, done when the
    destination is the source's whole copy, else a stalled try (runs.engine tries it again; its context cancelled as
    the stall guard does: whatever still writes there may stop); None while the looks cannot tell. The first look
    asks the destination's server for its checksum; later ones read the bytes back (a lost question stays lost)."""

    def __init__(
        self, ctx: Any, urls: tuple[str, str], *, size: int, checksum: str, expected: str, grace: float
    ) -> None:
        self.ctx, self.urls, self.size, self.checksum, self.expected, self.grace = (
            ctx, urls, size, checksum, expected, grace
        )  # fmt: skip
        self.looks = 0
        self.start: Any = None  # the copy's start, and its details and mode, given by transfer_file
        self.details: dict[str, Any] = {}
        self.arrived: dict[str, Any] | None = None  # what the last look found
        self.mode: Callable[[], str] = lambda: ""

    def __call__(self) -> FileOutcome | None:
        self.looks += 1
        began = utcnow()
        same, problem, there, how = destination_verdict(
            self.ctx, self.urls, size=self.size, checksum=self.checksum, expected=self.expected,
            within=ARRIVED_CHECK, ask_server=self.looks == 1,
        )  # fmt: skip
        end = utcnow()
        # The look runs beside the call (measure.stall): the copy's own details are not touched here, the caller takes
        # `arrived` once the call is back, a verdict carries a copy of them.
        self.arrived = {
            "grace": self.grace,
            "looks": self.looks,
            "checked_seconds": round((end - began).total_seconds(), 3),
            "checksum_by": how,
            "problem": problem,
            "ended_by": "call" if same is None else "look",  # "call": it returned by itself after the looks
        }
        if same is None:
            return None
        source_url, destination_url = self.urls
        details = {**self.details, "arrived": self.arrived}
        if same:
            details["call"] = f"abandoned: it had not returned {self.grace:.0f} s after all {self.size} bytes arrived"
            return FileOutcome(
                source_url, destination_url, self.size, self.start, end, True, "", self.mode(), there, details
            )
        threading.Thread(target=self.ctx.cancel, name="gfal2-cancel", daemon=True).start()
        details.update(cause=STALLED, errno=None, cancelled=False)
        error = (
            f"{STALLED}: all {self.size} bytes arrived but the copy had not returned {self.grace:.0f} s later, and its "
            f"destination is not the source's copy ({problem}), so the portal stopped it"
        )
        return FileOutcome(source_url, destination_url, 0, self.start, end, False, error, self.mode(), details=details)
