"""The stall guard of a copy: plain Python around a gfal2 context, no Django.

gfal2's own timeout is for a whole copy (300 s and up here) and its checksum timeout is 30 minutes; its GridFTP
plugin stops a copy whose performance markers stop (PERF_MARKER_TIMEOUT), its HTTP and XRootD plugins do not. So a
third-party copy whose server hung, or a checksum that never comes back, holds a worker's slot and its run for
that long, or for ever. The guard runs each gfal2 operation of a copy in a thread of its own while the calling
thread watches it:
- nothing happened for `seconds` (no byte moved by gfal2's progress markers, no gfal2 event such as a checksum or
  the copy begun or ended), or for `first_byte_within` before the first byte moved (the copy's own timeout: a
  server may queue a third-party copy that long): it cancels the context (ctx.cancel()) and the copy is a stall;
- a copy cancelled (by the guard, or by the caller's `cancel` event when its run ended) that has not come back
  `abandon_after` seconds later is left behind: gfal2's cancel does not break a TLS handshake or an XRootD socket
  wait (measured on the testbed: a frozen server held both for about 30 s), and a hung one may never come back.
  Its thread lives on until gfal2's own timeout ends it; the probe reports what it knows now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

STALLED = "stalled"
ABANDON_AFTER = 10.0  # seconds a cancelled operation may take to come back before the guard stops waiting for it


class Abandoned(Exception):
    """The operation was cancelled and did not come back in time: its thread is left to gfal2's own timeout."""


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
    ) -> None:
        self.ctx, self.seconds, self.cancel, self.abandon_after = ctx, seconds, cancel, abandon_after
        # Before its first byte a copy may wait longer: a server queues third-party copies (measured on the testbed:
        # 40 native copies of 512 MB at once waited up to 58 s for their first byte, then never more than 2.6 s
        # between two reports; 40 HTTP pushes 12 s, then 5.8 s). 0: the same as `seconds`.
        self.first_byte_within = first_byte_within or seconds
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

    def alive(self) -> None:
        """gfal2 reported an event (a phase of the copy began or ended)."""
        with self.lock:
            self.last = time.monotonic()

    def run(self, operation: Callable[[], T]) -> T:
        """operation() (a gfal2 call on this guard's context) in a thread of its own, watched from this one: its
        value, or the exception it raised, or Abandoned once it was cancelled and did not come back in time."""
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
        while not returned.wait(interval):
            now = time.monotonic()
            if stopped_at is None:
                with self.lock:
                    quiet = now - self.last
                    limit = self.seconds if self.bytes else self.first_byte_within
                if self.seconds > 0 and quiet >= limit:
                    self.fired, self.quiet, stopped_at = True, quiet, now
                    self._cancel()
                elif self.cancel is not None and self.cancel.is_set():
                    stopped_at = now  # its run ended: the caller cancels the context too, no harm in twice
                    self._cancel()
            elif now - stopped_at >= self.abandon_after:
                raise Abandoned(f"it had not returned {self.abandon_after:.0f} s after it was stopped")
        if "error" in result:
            raise result["error"]
        return result["value"]  # type: ignore[no-any-return]

    def _cancel(self) -> None:
        # gfal2's cancel can itself wait for the operation it cancels (measured: a TLS handshake to a frozen server
        # held it 30 s): it is sent from a thread of its own, and the guard keeps watching.
        threading.Thread(target=self.ctx.cancel, name="gfal2-cancel", daemon=True).start()

    def stall_message(self, text: str) -> str:
        return (
            f"{STALLED}: nothing moved for {int(self.quiet)} s ({self.bytes} bytes copied by then), so the portal "
            f"stopped the copy: {text}"
        )
