"""The work in flight in one worker process: one watcher thread refreshes the heartbeat of the copies (files) and
of the one-task probes (runs) it runs, the reaper's sign of life; it passes on gfal2's progress markers, and stops
the copies (gfal2's ctx.cancel()) and probes (their cancel event) of runs that ended."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from measure.outcomes import utcnow

from .engine import file_heartbeat, runs_stopped
from .probes.runs import runs_heartbeat

logger = logging.getLogger(__name__)

WATCH_INTERVAL = 0.5  # s between looks at the runs of the copies in flight


class Watcher:
    """The copies and probes in flight in this process: heartbeat every DISPATCH_HEARTBEAT s, stop when their run
    ends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # file id -> run id, context, cancelled, and the monotonic time after which the copy is taken for hung
        self.copies: dict[int, tuple[int, Any, threading.Event, float]] = {}
        # file id -> bytes copied so far and when gfal2 reported them (written by the copying threads)
        self.progress: dict[int, tuple[int, datetime]] = {}
        # run id -> the event its probe watches to stop early
        self.probes: dict[int, threading.Event] = {}
        self.thread: threading.Thread | None = None

    def _start(self) -> None:
        if self.thread is None or not self.thread.is_alive():
            self.thread = threading.Thread(target=self._loop, name="run-watcher", daemon=True)
            self.thread.start()

    def add(self, file_id: int, run_id: int, ctx: Any, cancelled: threading.Event, *, hung_after: float) -> None:
        with self.lock:
            self.copies[file_id] = (run_id, ctx, cancelled, time.monotonic() + hung_after)
            self._start()

    def add_probe(self, run_id: int, cancelled: threading.Event) -> None:
        with self.lock:
            self.probes[run_id] = cancelled
            self._start()

    def remove_probe(self, run_id: int) -> None:
        with self.lock:
            self.probes.pop(run_id, None)

    def remove(self, file_id: int) -> None:
        with self.lock:
            self.copies.pop(file_id, None)
            self.progress.pop(file_id, None)

    def report(self, file_id: int, done: int) -> None:
        with self.lock:
            if file_id in self.copies:
                self.progress[file_id] = (done, utcnow())

    def _loop(self) -> None:
        last_beat = 0.0
        while True:
            time.sleep(WATCH_INTERVAL)
            with self.lock:
                copies = dict(self.copies)
                progress = dict(self.progress)
                probes = dict(self.probes)
            if not copies and not probes:
                continue
            try:
                close_old_connections()
                stopped = runs_stopped(sorted({run_id for run_id, _, _, _ in copies.values()} | set(probes)))
                for run_id, ctx, cancelled, _ in copies.values():
                    if run_id in stopped and not cancelled.is_set():
                        cancelled.set()
                        ctx.cancel()
                for run_id, cancelled in probes.items():
                    if run_id in stopped:
                        cancelled.set()
                now = time.monotonic()
                if now - last_beat >= settings.DISPATCH_HEARTBEAT:
                    # A copy past its timeout and grace gets no more heartbeats: gfal2 cannot always stop a hung
                    # XRootD copy (nor can ctx.cancel()), and the reaper then ends the try as timed out.
                    alive = [file_id for file_id, (_, _, _, hung_at) in copies.items() if now < hung_at]
                    file_heartbeat(sorted(alive), progress={k: v for k, v in progress.items() if k in alive})
                    runs_heartbeat(sorted(probes))
                    last_beat = now
            except Exception:  # the database may be away a moment; the next round tries again
                logger.exception("run watcher")


watcher = Watcher()
