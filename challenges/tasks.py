"""Celery tasks of runs: thin wrappers that load ids and call challenges.runs and the probes.

Start a worker for a site with `celery -A portal worker -Q site.<SITE NAME> --pool threads --concurrency N`
(N at least the concurrency of the runs it serves, plus a few); a worker on `-Q default` serves every site
without a worker of its own. One watcher thread per worker process refreshes the heartbeat of the files it
copies (the reaper's sign of life) and aborts, with gfal2's ctx.cancel(), the copies of runs that ended.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from datetime import datetime
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections

from . import runs
from .choices import ActivityKind
from .probes.outcomes import FileOutcome, utcnow

logger = logging.getLogger(__name__)

WATCH_INTERVAL = 0.5  # s between looks at the runs of the copies in flight


def gfal2_context() -> Any:
    """A fresh gfal2 context (cheap: about 1 ms). On a testbed (PROBES_TESTBED) it trusts the testbed CA and sends
    the bearer token HTTP third-party copy needs there."""
    if settings.PROBES_TESTBED:
        from testbed.client import gfal2_context as testbed_context
        from testbed.grid import Testbed, TestbedConfig

        return testbed_context(Testbed(TestbedConfig.from_settings()))
    from .probes.context import gfal2_context_new

    return gfal2_context_new()


class _Watcher:
    """The copies in flight in this process: heartbeat every DISPATCH_HEARTBEAT s, cancel when their run ends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # file id -> run id, context, cancelled, and the monotonic time after which the copy is taken for hung
        self.copies: dict[int, tuple[int, Any, threading.Event, float]] = {}
        # file id -> bytes copied so far and when gfal2 reported them (written by the copying threads)
        self.progress: dict[int, tuple[int, datetime]] = {}
        self.thread: threading.Thread | None = None

    def add(self, file_id: int, run_id: int, ctx: Any, cancelled: threading.Event, *, hung_after: float) -> None:
        with self.lock:
            self.copies[file_id] = (run_id, ctx, cancelled, time.monotonic() + hung_after)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="run-watcher", daemon=True)
                self.thread.start()

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
            if not copies:
                continue
            try:
                close_old_connections()
                stopped = runs.runs_stopped(sorted({run_id for run_id, _, _, _ in copies.values()}))
                for run_id, ctx, cancelled, _ in copies.values():
                    if run_id in stopped and not cancelled.is_set():
                        cancelled.set()
                        ctx.cancel()
                now = time.monotonic()
                if now - last_beat >= settings.DISPATCH_HEARTBEAT:
                    # A copy past its timeout and grace gets no more heartbeats: gfal2 cannot always stop a hung
                    # XRootD copy (nor can ctx.cancel()), and the reaper then ends the try as timed out.
                    alive = [file_id for file_id, (_, _, _, hung_at) in copies.items() if now < hung_at]
                    runs.file_heartbeat(sorted(alive), progress={k: v for k, v in progress.items() if k in alive})
                    last_beat = now
            except Exception:  # the database may be away a moment; the next round tries again
                logger.exception("run watcher")


_watcher = _Watcher()


def _worker_name(task: Any) -> str:
    return str(getattr(task.request, "hostname", "") or socket.gethostname())


@shared_task(bind=True, name="challenges.run_prepare", ignore_result=True, acks_late=True)
def run_prepare(self: Any, run_id: int) -> None:
    """First task of a run: a transfer run gets its test file and its first C file tasks; the other kinds run
    their probe here."""
    run = runs.Run.objects.filter(pk=run_id).first()
    if run is None:
        return
    if run.kind in runs.TRANSFER_KINDS:
        from .probes.testfiles import test_file

        checksum = str(run.parameters.get("checksum") or "ADLER32")

        def ensure_test_file(base: str, size: int) -> str:
            return test_file(gfal2_context(), base, size, checksum=checksum)

        runs.run_prepare(run_id, ensure_test_file=ensure_test_file)
    else:
        run_probe(run_id)


@shared_task(bind=True, name="challenges.transfer_file", ignore_result=True, acks_late=True)
def transfer_file_task(self: Any, file_id: int, attempt: int) -> None:
    """Copy one file of a transfer run (try `attempt`), store its record, send the run's next file."""
    from .probes.transfer import transfer_file

    received = time.monotonic()
    file = runs.file_claim(file_id, attempt, self.request.id, _worker_name(self))
    logger.debug("file %s try %s: claimed in %.3f s", file_id, attempt, time.monotonic() - received)
    if file is None:
        logger.info("file %s try %s: stale message, dropped", file_id, attempt)
        return
    parameters = file.run.parameters
    ctx = gfal2_context()
    cancelled = threading.Event()
    _watcher.add(file.pk, file.run_id, ctx, cancelled, hung_after=runs.copy_deadline_seconds(parameters))
    try:
        try:
            outcome = transfer_file(
                ctx,
                file.source_url,
                file.destination_url,
                mode=parameters.get("copy_mode") or None,
                streams=int(parameters.get("streams") or 1),
                timeout=int(parameters.get("timeout") or 300),
                checksum=str(parameters.get("checksum") or "ADLER32"),
                cancel=cancelled,
                progress=functools.partial(_watcher.report, file.pk),
            )
        except Exception as exc:  # a bug or an odd URL must still end the file, with the reason
            now = utcnow()
            outcome = FileOutcome(file.source_url, file.destination_url, 0, file.start or now, now, False, str(exc))
    finally:
        _watcher.remove(file.pk)
    finishing = time.monotonic()
    runs.file_finish(file_id, attempt, self.request.id, outcome)
    logger.debug(
        "file %s try %s: copy ended %.3f s ago, finish took %.3f s",
        file_id,
        attempt,
        (utcnow() - outcome.end).total_seconds(),
        time.monotonic() - finishing,
    )


def run_probe(run_id: int) -> None:
    """Run a staging, network, cache or io probe as one task; its files become records, its summary the run's."""
    run = runs.run_probe_begin(run_id)
    if run is None:
        return
    parameters = run.parameters
    outcomes: list[FileOutcome] = []
    summary: dict[str, Any] = {}
    error = ""
    try:
        if run.kind == ActivityKind.STAGING:
            from .probes.staging import stage_files

            staging = stage_files(
                gfal2_context(),
                list(parameters["urls"]),
                bulk_size=parameters["bulk_size"],
                pin_time=parameters["pin_time"],
                timeout=parameters["timeout"],
                poll_interval=parameters["poll_interval"],
            )
            outcomes, summary = list(staging.files), staging.to_dict()
        elif run.kind == ActivityKind.NETWORK:
            from .probes.network import network_probe

            network = network_probe(
                parameters["host"],
                parameters["port"],
                streams=parameters["streams"],
                duration=parameters["duration"],
                reverse=parameters["reverse"],
            )
            summary = network.to_dict()
            if not getattr(network, "ok", True):
                error = f"network probe failed: {getattr(network, 'error', '')}"
        elif run.kind == ActivityKind.CACHE:
            from .probes.cache import cache_study

            cache_result = cache_study(
                gfal2_context(),
                list(parameters["origin_urls"]),
                cache_url_of=_cache_url_of(parameters["cache_url"]),
                flush=_cache_flush(parameters["cache_url"]),
            )
            outcomes, summary = list(cache_result.files), cache_result.to_dict()
        elif run.kind == ActivityKind.IO:
            from .probes.io import io_probe

            io_result = io_probe(
                gfal2_context(), parameters["endpoint"], parameters["file_size"], timeout=parameters["timeout"]
            )
            outcomes, summary = list(io_result.files), io_result.to_dict()
        else:
            error = f"no probe for runs of kind {run.kind}"
    except Exception as exc:  # the probe's own failure ends the run with its reason
        logger.exception("run %s", run_id)
        error = f"{run.kind} probe failed: {getattr(exc, 'message', '') or exc}"
    runs.run_probe_store(run_id, outcomes, summary, error)


def _cache_url_of(cache_url: str) -> Any:
    """origin URL -> the same path through the cache endpoint."""
    from urllib.parse import urlsplit, urlunsplit

    cache = urlsplit(cache_url)

    def cache_url_of(origin_url: str) -> str:
        origin = urlsplit(origin_url)
        return urlunsplit((cache.scheme, cache.netloc, origin.path, origin.query, ""))

    return cache_url_of


def _cache_flush(cache_url: str) -> Any:
    """Empty the cache before the cache-empty reads: possible only for the testbed's own cache."""

    def flush() -> None:
        if settings.PROBES_TESTBED:
            from testbed.grid import Testbed, TestbedConfig

            bed = Testbed(TestbedConfig.from_settings())
            if bed.endpoint("xcache.root").url.split("//")[1] == cache_url.split("//")[1]:
                bed.cache_flush()
                return
        raise RuntimeError(f"cannot empty the cache at {cache_url}: only the testbed's cache can be flushed")

    return flush


@shared_task(name="challenges.runs_reap", ignore_result=True)
def runs_reap() -> dict[str, int]:
    """Beat: end runs past their deadline, retry or fail files whose worker was lost, re-send lost messages."""
    summary = runs.runs_reap()
    return summary.__dict__


@shared_task(name="challenges.activities_auto_run", ignore_result=True)
def activities_auto_run() -> list[int]:
    """Beat: start the runs of auto-run activities whose window opened; cancel those whose window closed."""
    return [run.pk for run in runs.activities_auto_run()]
