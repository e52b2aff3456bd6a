"""The transfer probe: copy one file with gfal2 and report what really happened. Plain Python, no Django.

Modes: pull and push are HTTP third-party copies (the gfal2 "HTTP PLUGIN" DEFAULT_COPY_MODE, without fallback to
streamed, so a requested mode is done or fails); streamed passes the bytes through this machine; native is
XRootD's own third-party copy (root:// to root://). mode=None lets gfal2 choose. What gfal2 did is read from its
TRANSFER:TYPE event ("3rd pull", "3rd push", "streamed") into FileOutcome.mode, with every event in details.

A failure keeps gfal2's message behind a prefix that names the cause, so the three a challenge meets most read
apart at a glance: "destination refused the write", "source file missing", "checksum mismatch"; and "destination
full", which stops the whole run (runs.engine). When gfal2's own
message does not tell (XRootD answers a missing source of a third-party copy with "Destination does not support
delegation"), the source is looked at after the failure, never before a copy.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import gfal2

from .arrival import ARRIVED_GRACE, ArrivalLook, checksums_same
from .outcomes import FileOutcome, utcnow
from .stall import STALLED, Abandoned, Arrived, CopyPeers, StallGuard
from .tokens import token_redacted

MODES = ("pull", "push", "streamed", "native")
HTTP_COPY_MODES = {"pull": "3rd pull", "push": "3rd push", "streamed": "streamed"}
HTTP_SCHEMES = ("http", "https", "dav", "davs")

REFUSED = "destination refused the write"
MISSING = "source file missing"
CHECKSUM = "checksum mismatch"
CANCELLED = "cancelled"
DESTINATION_FULL = "destination full"
EXISTS = "destination exists"  # the name was taken before the copy: someone else's file, never overwritten
TIMEOUT = "timed out"


def _message(exc: Exception) -> str:
    return token_redacted(str(getattr(exc, "message", "") or exc))


def _is_http(url: str) -> bool:
    return urlsplit(url).scheme.lower() in HTTP_SCHEMES


def _is_root(url: str) -> bool:
    return urlsplit(url).scheme.lower() in ("root", "xroot", "roots", "xroots")


def _mode_done(copy_type: str, source_url: str, destination_url: str) -> str:
    """pull | push | streamed | native from gfal2's TRANSFER:TYPE event (XRootD's own TPC reports "3rd pull")."""
    kind = copy_type.strip().lower()
    if kind.startswith("3rd"):
        if _is_root(source_url) and _is_root(destination_url):
            return "native"
        return "push" if "push" in kind else "pull"
    if kind == "streamed" or kind:
        return "streamed"
    return ""


def _source_missing(ctx: Any, url: str) -> bool:
    try:
        ctx.stat(url)
    except gfal2.GError as exc:
        return exc.code == errno.ENOENT
    return False


def _cause(ctx: Any, exc: gfal2.GError, source_url: str, cancelled: bool) -> str:  # noqa: PLR0911 (one per cause)
    """What went wrong, from gfal2's code and words (the source is looked at only when they do not tell)."""
    lowered = _message(exc).lower()
    if cancelled or exc.code == errno.ECANCELED:
        return CANCELLED
    if exc.code == errno.EEXIST or "file exists" in lowered or "overwrite is not" in lowered:
        return EXISTS
    if exc.code in (errno.ENOSPC, errno.EDQUOT) or any(
        words in lowered for words in ("no space left", "quota exceeded", "insufficient storage", " 507")
    ):
        return DESTINATION_FULL
    if "checksum" in lowered and any(word in lowered for word in ("mismatch", "error", "differ", "not match")):
        return CHECKSUM
    if exc.code == errno.ETIMEDOUT or "timeout" in lowered or "timed out" in lowered:
        return TIMEOUT
    if _source_missing(ctx, source_url):
        return MISSING
    if exc.code in (errno.EACCES, errno.EPERM, errno.EROFS) or "permission denied" in lowered or "403" in lowered:
        return REFUSED
    return "other"


def _classify(ctx: Any, exc: gfal2.GError, source_url: str, cancelled: bool) -> tuple[str, str]:
    """(cause, message): the cause names what went wrong; the message keeps gfal2's own words."""
    text = _message(exc)
    cause = _cause(ctx, exc, source_url, cancelled)
    if cause == "other":
        return cause, text
    if cause == MISSING:
        return cause, f"{MISSING} ({source_url}): {text}"
    if cause == EXISTS:
        return cause, f"{EXISTS}: a file was already there (not this try's; the portal never overwrites): {text}"
    return cause, f"{cause}: {text}"


def transfer_file(
    ctx: Any,
    source_url: str,
    destination_url: str,
    *,
    mode: str | None = None,
    streams: int = 1,
    timeout: int = 300,
    checksum: str = "ADLER32",
    overwrite: bool = False,
    expected_checksum: str = "",
    cancel: threading.Event | None = None,
    progress: Callable[[int], None] | None = None,
    stall_timeout: float = 0,
    first_byte_timeout: float = 0,
    peers: CopyPeers | None = None,
    size: int = 0,
    arrived_grace: float = ARRIVED_GRACE,
    copy_returned: Callable[[], None] | None = None,
) -> FileOutcome:
    """Copy source_url to destination_url once and say how it went: real start and end, bytes (the source's
    size), the mode gfal2 actually used, the checksum both ends agreed on, gfal2's events in details.

    checksum: "ADLER32" (or another algorithm gfal2 knows) checked at both ends, or "none"; expected_checksum: the
    value the source must have. `cancel`, set by the caller, marks a failure after ctx.cancel() as cancelled.
    `progress` is called with the bytes copied so far each time gfal2 reports them (about every 5 s). The stall
    guard (measure.stall; `stall_timeout` s, 0: none) stops a copy in which nothing moved for that long, that
    moved no byte within `first_byte_timeout` (default: `timeout`), or that later copies on its link (`peers`)
    passed before its first byte: "stalled"; a stopped copy that gfal2 does not bring back within 10 s is left to
    gfal2's own timeout in its thread. A copy that reported all its `size` bytes (0: not known) and has not returned
    `arrived_grace` s later ends on a look at its destination (measure.arrival). `copy_returned` is called in the
    copy's thread once gfal2's call returned, before the probe sees it: a seam for tests. `overwrite` stays off for
    the portal's copies: a name already there is someone else's file, and the copy fails as "destination exists"."""
    params = _copy_parameters(ctx, source_url, destination_url, mode=mode, streams=streams, timeout=timeout)
    params.overwrite = overwrite
    checked_here = _checksum_set(ctx, params, (source_url, destination_url), checksum, expected_checksum)
    link = (urlsplit(source_url).netloc, urlsplit(destination_url).netloc)
    peer = peers.begin(link) if peers is not None else None
    overtaken = (lambda: peers.overtaken(peer)) if peers is not None and peer is not None else None
    peer_ends = (lambda: peers.end(peer)) if peers is not None and peer is not None else (lambda: None)
    first_byte_within = max(first_byte_timeout or timeout, stall_timeout)
    guard = StallGuard(
        ctx, stall_timeout, cancel=cancel, first_byte_within=first_byte_within, overtaken=overtaken, size=size
    )
    watch = _CopyWatch(guard, progress)
    params.event_callback = watch.on_event
    params.monitor_callback = watch.on_progress
    details: dict[str, Any] = {"requested_mode": mode or "", "streams": streams, "events": watch.events}
    details["phases"] = watch.phases
    start = utcnow()
    urls = (source_url, destination_url)
    look = ArrivalLook(ctx, urls, size=size, checksum=checksum, expected=expected_checksum, grace=arrived_grace)
    look.start, look.details = start, details
    look.mode = lambda: _mode_done(watch.copy_type, source_url, destination_url)
    try:
        copy = _copy_call(ctx, params, urls, copy_returned)
        guard.run(copy, arrived_look=look if size else None, arrived_grace=arrived_grace)  # "all bytes" needs the size
        watch.mark("returned")
        details.update({"arrived": look.arrived} if look.arrived else {})  # looked at, then ended by its call
    except Arrived as arrived:
        peer_ends()
        return arrived.verdict
    except (gfal2.GError, Abandoned) as exc:
        end = utcnow()
        peer_ends()
        mode_done = _mode_done(watch.copy_type, source_url, destination_url)
        cause, message = _failure(ctx, exc, guard, source_url, cancelled=bool(cancel is not None and cancel.is_set()))
        details.update(cause=cause, errno=getattr(exc, "code", None), cancelled=cause == CANCELLED)
        return FileOutcome(
            source_url, destination_url, 0, start, end, False, error=message, mode=mode_done, details=details
        )
    end = utcnow()
    peer_ends()
    size, agreed = _after_copy(ctx, guard, source_url, destination_url, checksum=checksum, details=details)
    mode_done = _mode_done(watch.copy_type, source_url, destination_url)
    outcome = FileOutcome(source_url, destination_url, size, start, end, True, "", mode_done, agreed, details)
    if checked_here:
        _checksums_compared(ctx, guard, outcome, checksum=checksum, expected=expected_checksum)
    watch.mark("ended")
    return outcome


def _copy_call(ctx: Any, params: Any, urls: tuple[str, str], returned: Callable[[], None] | None) -> Callable[[], None]:
    """gfal2's copy call, then `returned` (transfer_file's seam) in the same thread."""

    def copy() -> None:
        ctx.filecopy(params, *urls)
        if returned is not None:
            returned()

    return copy


def _checksum_set(ctx: Any, params: Any, urls: tuple[str, str], checksum: str, expected_checksum: str) -> bool:
    """Have gfal2 compare the checksums within the copy; True when the portal must compare them after it instead:
    XrdCl drops a URL's authz CGI from its checksum queries, so with root:// tokens they would be refused."""
    if not checksum or checksum.lower() == "none":
        return False
    if not _checksums_in_copy(ctx, *urls):
        return True
    params.set_checksum(gfal2.checksum_mode.both, checksum, expected_checksum)
    return False


def _checksums_compared(ctx: Any, guard: StallGuard, outcome: FileOutcome, *, checksum: str, expected: str) -> None:
    """The portal's own comparison of a copy's checksums (details say checksum_by "portal"): a difference, or a
    checksum that cannot be read, fails the outcome as a checksum mismatch."""
    outcome.details["checksum_by"] = "portal"
    problem = _checksums_differ(ctx, guard, outcome.source_url, outcome.checksum, checksum=checksum, expected=expected)
    if problem:
        outcome.ok, outcome.bytes, outcome.error = False, 0, f"{CHECKSUM}: {problem}"
        outcome.details["cause"] = CHECKSUM


def _checksums_in_copy(ctx: Any, source_url: str, destination_url: str) -> bool:
    """Whether gfal2 may compare the checksums within the copy (not when the context says the copy's URLs carry
    tokens XrdCl's checksum query would drop)."""
    in_copy = getattr(ctx, "checksums_in_copy", None)
    return True if in_copy is None else bool(in_copy(source_url, destination_url))


def _checksums_differ(
    ctx: Any, guard: StallGuard, source_url: str, agreed: str, *, checksum: str, expected: str
) -> str:
    """Why the destination's checksum is not the source's (empty when it is): the portal's own comparison, for
    copies whose checksums gfal2 could not compare."""
    try:
        wanted = expected or str(guard.run(lambda: ctx.checksum(source_url, checksum)))
    except (gfal2.GError, Abandoned) as exc:
        return f"the source's {checksum} could not be read: {_message(exc)}"
    if not agreed:
        return f"the destination's {checksum} could not be read"
    return "" if checksums_same(wanted, agreed) else f"source {checksum} {wanted}, destination {agreed}"


def _copy_parameters(
    ctx: Any, source_url: str, destination_url: str, *, mode: str | None, streams: int, timeout: int
) -> Any:
    """gfal2's transfer parameters of one copy, and the HTTP plugin's copy mode for a requested one (without the
    fallback to streamed, so that the requested mode is done or fails); ValueError for a mode it does not know."""
    if mode not in (None, "", *MODES):
        raise ValueError(f"mode must be one of {', '.join(MODES)} or None, not {mode!r}")
    params = ctx.transfer_parameters()
    params.create_parent = True
    params.timeout = timeout
    params.nbstreams = streams
    if mode in HTTP_COPY_MODES and (_is_http(source_url) or _is_http(destination_url)):
        ctx.set_opt_string("HTTP PLUGIN", "DEFAULT_COPY_MODE", HTTP_COPY_MODES[mode])
        ctx.set_opt_boolean("HTTP PLUGIN", "ENABLE_FALLBACK_TPC_COPY", mode == "streamed")
    return params


class _CopyWatch:
    """gfal2's callbacks of one copy: its events (and the copy type among them), its progress, fed to the guard."""

    def __init__(self, guard: StallGuard, progress: Callable[[int], None] | None) -> None:
        self.guard, self.progress = guard, progress
        self.events: list[str] = []
        self.copy_types: list[str] = []
        # Seconds from the copy's call to its first byte and to its last (as gfal2 reported them: progress comes
        # every few seconds, a copy shorter than that reports none), to the call's return, and to the probe's end
        # (checksums compared); None: not reached. Where a slow copy spent its time (bench/probes.py).
        self.began = time.monotonic()
        self.phases: dict[str, float | None] = dict.fromkeys(("first_byte", "all_bytes", "returned", "ended"))

    def mark(self, phase: str) -> None:
        if self.phases[phase] is None:
            self.phases[phase] = round(time.monotonic() - self.began, 3)

    @property
    def copy_type(self) -> str:
        return self.copy_types[-1] if self.copy_types else ""

    def on_event(self, event: Any) -> None:
        stage, description = str(event.stage), token_redacted(str(event.description))
        self.events.append(f"{stage} {description}".strip())
        if stage.endswith("TRANSFER:TYPE"):
            self.copy_types.append(description)
        self.guard.alive()

    def on_progress(self, *marker: Any) -> None:  # source, destination, average, instant, bytes so far, elapsed
        done = int(marker[4])
        if done:
            self.mark("first_byte")
        self.guard.moved(done)
        if self.guard.arrived_at is not None:
            self.mark("all_bytes")
        if self.progress is not None:
            self.progress(done)


def _failure(ctx: Any, exc: Exception, guard: StallGuard, source_url: str, *, cancelled: bool) -> tuple[str, str]:
    """(cause, message) of a copy that failed: cancelled, stalled (the guard stopped it), or what gfal2 said."""
    text = _message(exc) + (" (its thread is left to gfal2's own timeout)" if isinstance(exc, Abandoned) else "")
    # A stopped copy is not looked into further: its context may still be busy in the copy's thread.
    if cancelled and isinstance(exc, Abandoned):
        return CANCELLED, f"{CANCELLED}: {text}"
    if guard.fired and not cancelled:
        return STALLED, guard.stall_message(text)
    return _classify(ctx, exc, source_url, cancelled)  # type: ignore[arg-type]  # a GError: Abandoned came first


def _after_copy(
    ctx: Any, guard: StallGuard, source_url: str, destination_url: str, *, checksum: str, details: dict[str, Any]
) -> tuple[int, str]:
    """(size, checksum) of a successful copy. The source's size: with checksums compared at both ends it is what
    arrived, and a source stat does not race with the destination server still closing the file. Watched too: a
    look that never answers must not hold the copy's result, and a failed look must not fail it (details say)."""
    size, agreed = 0, ""
    try:
        size = int(guard.run(lambda: ctx.stat(source_url)).st_size)
        if checksum and checksum.lower() != "none":
            agreed = str(guard.run(lambda: ctx.checksum(destination_url, checksum)))
    except (gfal2.GError, Abandoned) as exc:
        details["after_copy"] = _message(exc)
    return size, agreed
