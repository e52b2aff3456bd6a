"""The stall guard of a copy: plain Python around a gfal2 context, no Django.

gfal2's own timeout is for a whole copy (300 s and up here) and its checksum timeout is 30 minutes; its GridFTP
plugin stops a copy whose performance markers stop (PERF_MARKER_TIMEOUT), its HTTP and XRootD plugins do not. So a
third-party copy whose server hung, or a checksum that never comes back, holds a worker's slot and its run for
that long, or for ever. The guard runs each gfal2 operation of a copy in a thread of its own while the calling
thread watches it:
- nothing happened for `seconds` (no byte moved by gfal2's progress markers, no gfal2 event such as a checksum or
  the copy begun or ended), or for `first_byte_within` before the first byte moved (the copy's own timeout: a
  server may queue a third-party copy that long): it cancels the context (ctx.cancel()) and the copy is a stall;
- no byte moved yet while the copies that were in flight on its link when it began have all ended and a copy that
  began after it has ended too (`CopyPeers`, OVERTAKEN_GRACE later): it is not waiting in a server's queue behind
  them, it is stuck (measured on the testbed: one of 40 native copies sat in gfal2's copy call with no byte for
  more than ten minutes after the other 39 ended within one); the copy is a stall too, tried once more;
- a copy cancelled (by the guard, or by the caller's `cancel` event when its run ended) that has not come back
  `abandon_after` seconds later is left behind: gfal2's cancel does not break a TLS handshake or an XRootD socket
  wait (measured on the testbed: a frozen server held both for about 30 s), and a hung one may never come back.
  Its thread lives on until gfal2's own timeout ends it; the probe reports what it knows now;
- a copy that reported all its bytes (`size`) and whose call has not returned `arrived_grace` seconds later is
  looked at by the caller's `arrived_look` (measure.arrival: its destination), again every `arrived_again`
  seconds while the look cannot tell; a look that tells ends the wait with Arrived, nothing cancelled.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

STALLED = "stalled"
ABANDON_AFTER = 10.0  # seconds a cancelled operation may take to come back before the guard stops waiting for it
# Seconds a copy without its first byte may still wait once the copies ahead of it on its link have ended and a later
# one has ended too: a server's queue has emptied by then (XRootD starts a queued TPC within about a second).
OVERTAKEN_GRACE = 30.0
OVERTAKEN_LOOK = 2.0  # seconds between two looks at the peers of a copy without its first byte


@dataclass
class _Copy:
    link: tuple[str, str]
    began: float
    ended: float | None = None


class CopyPeers:
    """The copies of one process, by link (source and destination host): what `overtaken` needs to tell a copy that
    waits in a server's queue from one that is stuck. Thread-safe; ended copies are forgotten after an hour."""

    KEEP = 1800.0  # an ended copy older than this tells nothing: the copies it overtook were stopped by their bound

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.copies: dict[int, _Copy] = {}
        self.numbers = itertools.count()

    def begin(self, link: tuple[str, str]) -> int:
        now = time.monotonic()
        with self.lock:
            stale = [
                key for key, copy in self.copies.items() if copy.ended is not None and now - copy.ended > self.KEEP
            ]
            for key in stale:
                del self.copies[key]
            key = next(self.numbers)
            self.copies[key] = _Copy(link, now)
            return key

    def end(self, key: int) -> None:
        with self.lock:
            if key in self.copies:
                self.copies[key].ended = time.monotonic()

    def overtaken(self, key: int) -> float | None:
        """Seconds since copy `key` was left behind on its link (every copy in flight there when it began has ended,
        and so has one that began after it), or None while it is not."""
        with self.lock:
            mine = self.copies.get(key)
            if mine is None or mine.ended is not None:
                return None
            cleared = 0.0
            later_ended: float | None = None
            for other_key, other in self.copies.items():
                if other_key == key or other.link != mine.link:
                    continue
                if other.began <= mine.began:
                    if other.ended is None:
                        if other.began < mine.began or other_key < key:
                            return None  # a copy ahead of it is still in flight: it may be queued behind it
                    elif other.ended > mine.began:
                        cleared = max(cleared, other.ended)
                elif other.ended is not None:
                    later_ended = other.ended if later_ended is None else min(later_ended, other.ended)
            if later_ended is None:
                return None
            return time.monotonic() - max(cleared, later_ended)


peers = CopyPeers()  # this process's copies (a worker's threads, or a bench's)


class Abandoned(Exception):
    """The operation was cancelled and did not come back in time: its thread is left to gfal2's own timeout."""


class _Look:
    """A look at a copy's destination (StallGuard.run's `arrived_look`) in a thread of its own, so that the guard
    keeps watching the copy's call meanwhile and sees it return at once: a look may take 8 s (ARRIVED_CHECK; under
    load many did, and their calls returned by themselves), and a call that returned during a look was seen only at
    the look's end. `done` is set when the look has said; `verdict` is what it said."""

    def __init__(self, look: Callable[[], Any]) -> None:
        self.done, self.verdict = threading.Event(), None

        def target() -> None:
            try:
                self.verdict = look()
            finally:
                self.done.set()

        threading.Thread(target=target, name="arrival-look", daemon=True).start()


class Arrived(Exception):
    """Every byte of the copy arrived, its call had not returned a grace later, and the caller's look told how the
    copy ended (`verdict`): the call's thread is left to gfal2, not cancelled."""

    def __init__(self, verdict: Any) -> None:
        super().__init__("all its bytes arrived and the call has not returned")
        self.verdict = verdict


def call_within(operation: Callable[[], T], seconds: float) -> T:
    """operation() in a thread of its own: its value, or the exception it raised, or Abandoned when it has not
    returned within `seconds` (its thread is left behind; nothing is cancelled, as its context may be busy with
    another call that must not be disturbed)."""
    result: dict[str, Any] = {}
    returned = threading.Event()

    def target() -> None:
        try:
            result["value"] = operation()
        except BaseException as exc:  # handed to the caller's thread, raised there
            result["error"] = exc
        finally:
            returned.set()

    threading.Thread(target=target, name="gfal2-look", daemon=True).start()
    if not returned.wait(max(seconds, 0.0)):
        raise Abandoned(f"it had not returned within {seconds:.0f} s")
    if "error" in result:
        raise result["error"]
    return result["value"]


class StallGuard:
    """Watches the gfal2 operations of one copy (`run`): cancels the context when nothing happened for `seconds`
    (0: never), and stops waiting for an operation that a cancel did not bring back."""

    def __init__(
        self,
        ctx: Any,
        seconds: float,
        *,
        cancel: threading.Event | None = None,
        abandon_after: float = ABANDON_AFTER,
        first_byte_within: float = 0,
        overtaken: Callable[[], float | None] | None = None,
        size: int = 0,
    ) -> None:
        self.ctx, self.seconds, self.cancel, self.abandon_after = ctx, seconds, cancel, abandon_after
        self.size = size  # the bytes a copy moves in all, when known (0: not known)
        self.arrived_at: float | None = None  # when gfal2 reported all `size` bytes
        self.next_look = 0.0  # when the destination of a copy whose bytes all arrived may be looked at again
        # Before its first byte a copy may wait longer: a server queues third-party copies (measured on the testbed:
        # 40 native copies of 512 MB at once waited up to 58 s for their first byte, then never more than 2.6 s
        # between two reports; 40 HTTP pushes 12 s, then 5.8 s). 0: the same as `seconds`.
        self.first_byte_within = first_byte_within or seconds
        self.overtaken = overtaken  # seconds since later copies on its link overtook it (CopyPeers), or None
        self.stuck = False  # fired before the first byte because the copy was overtaken
        self.looked = 0.0  # when the peers were last asked
        self.began = time.monotonic()
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.bytes = 0
        self.fired = False  # the guard cancelled the copy: a stall
        self.quiet = 0.0  # how long nothing had happened when it fired

    def moved(self, done: int) -> None:
        """gfal2 reported `done` bytes copied: a sign of life only when more than before."""
        with self.lock:
            if done > self.bytes:
                self.bytes, self.last = done, time.monotonic()
            if self.size and done >= self.size and self.arrived_at is None:
                self.arrived_at = time.monotonic()

    def alive(self) -> None:
        """gfal2 reported an event (a phase of the copy began or ended)."""
        with self.lock:
            self.last = time.monotonic()

    def run(
        self,
        operation: Callable[[], T],
        *,
        arrived_look: Callable[[], Any] | None = None,
        arrived_grace: float = 0,
        arrived_again: float = 10.0,
    ) -> T:
        """operation() (a gfal2 call on this guard's context) in a thread of its own, watched from this one: its
        value, or the exception it raised, or Abandoned once it was cancelled and did not come back in time, or
        Arrived with what `arrived_look` (for a copy of `size` bytes) said once they all arrived `arrived_grace` s
        ago without a return (None: it cannot tell yet; asked again `arrived_again` s later)."""
        result: dict[str, Any] = {}
        returned = threading.Event()

        def target() -> None:
            try:
                result["value"] = operation()
            except BaseException as exc:  # handed to the caller's thread, raised there
                result["error"] = exc
            finally:
                returned.set()

        self.alive()  # each operation starts its own quiet time
        threading.Thread(target=target, name="gfal2-operation", daemon=True).start()
        interval = min(1.0, self.seconds / 4) if self.seconds > 0 else 1.0
        stopped_at: float | None = None
        look: _Look | None = None  # the look at the destination of a copy whose bytes all arrived, under way
        while not returned.wait(0.1 if look is not None else interval):  # a look under way: its verdict soon
            now = time.monotonic()
            if stopped_at is None:
                with self.lock:
                    quiet = now - self.last
                    limit = self.seconds if self.bytes else self.first_byte_within
                    arrived = self.arrived_at is not None and now - self.arrived_at >= arrived_grace
                if arrived and arrived_look is not None and now >= self.next_look and look is None:
                    look = _Look(arrived_look)  # beside the call: a call back meanwhile is seen at once
                if look is not None and look.done.is_set():
                    if look.verdict is not None and not returned.is_set():  # a call back meanwhile says it itself
                        raise Arrived(look.verdict)
                    self.next_look, look = time.monotonic() + arrived_again, None
                left_behind = self._left_behind()
                if self.seconds > 0 and (quiet >= limit or left_behind):
                    self.fired, self.stuck, stopped_at = True, left_behind, now
                    self.quiet = now - self.began if left_behind else quiet
                    self._cancel()
                elif self.cancel is not None and self.cancel.is_set():
                    stopped_at = now  # its run ended: the caller cancels the context too, no harm in twice
                    self._cancel()
            elif now - stopped_at >= self.abandon_after:
                raise Abandoned(f"it had not returned {self.abandon_after:.0f} s after it was stopped")
        if "error" in result:
            raise result["error"]
        return result["value"]  # type: ignore[no-any-return]

    def _left_behind(self) -> bool:
        """No byte yet, and overtaken on its link for OVERTAKEN_GRACE s: stuck, not queued. Asked of the peers at
        most every OVERTAKEN_LOOK s (they are every copy of the process: a look walks them all)."""
        now = time.monotonic()
        if self.bytes or self.overtaken is None or now - self.looked < OVERTAKEN_LOOK:
            return False
        self.looked = now
        since = self.overtaken()
        return since is not None and since >= OVERTAKEN_GRACE

    def _cancel(self) -> None:
        # gfal2's cancel can itself wait for the operation it cancels (measured: a TLS handshake to a frozen server
        # held it 30 s): it is sent from a thread of its own, and the guard keeps watching.
        threading.Thread(target=self.ctx.cancel, name="gfal2-cancel", daemon=True).start()

    def stall_message(self, text: str) -> str:
        if self.stuck:
            return (
                f"{STALLED}: no byte moved in {int(self.quiet)} s while the copies ahead of it on its link and a "
                f"later one ended (stuck, not queued), so the portal stopped the copy: {text}"
            )
        return (
            f"{STALLED}: nothing moved for {int(self.quiet)} s ({self.bytes} bytes copied by then), so the portal "
            f"stopped the copy: {text}"
        )
