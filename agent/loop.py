"""The agent's loop: take jobs by long poll while it has free slots, run each in a thread of its own, keep each
result in the spool and deliver it (now, or once the portal is back), and beat every `heartbeat` s with its version,
kinds and jobs in flight, stopping those whose run ended."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from . import KINDS
from .config import AgentConfig
from .context import AgentProbeContext, credentials_apply
from .portal import Portal, PortalRefused, PortalUnreachable
from .spool import Spool
from .work import Running, job_run

logger = logging.getLogger("agent")

BACKOFF_MAX = 10.0  # s between tries while the portal does not answer
HUNG_GRACE = 60.0  # a copy past its timeout and this grace gets no more heartbeats: the portal's reaper ends its try


class Agent:
    def __init__(self, config: AgentConfig) -> None:
        self.config = config
        self.portal = Portal(config)
        self.spool = Spool(config.spool)
        credentials_apply(config.credentials)
        self.context = AgentProbeContext(config.credentials)
        self.lock = threading.Lock()
        self.running: dict[int, tuple[Running, float]] = {}  # job id -> the job, when it is taken for hung
        self.stopping = threading.Event()
        self.delivering = threading.Lock()

    # --- the loop ------------------------------------------------------------------------------------------------

    def run(self) -> None:
        logger.info(
            "agent of %s for %s: %d slots, spool %s",
            self.config.site,
            self.config.portal_url,
            self.config.slots,
            self.config.spool,
        )
        # gfal2 loads its plugins (XRootD's client among them) with the first context. Made here, before any job's
        # thread: a first context made while another job's thread started iperf3 hung in that loading for good
        # (seen once in TB-T1-A's namespace, the prepare job of a transfer run beside an iperf3 run).
        self.context.gfal2_context()
        threading.Thread(target=self._beat, name="heartbeat", daemon=True).start()
        backoff = 1.0
        while not self.stopping.is_set():
            try:
                pending = self.deliver()
                free = self.config.slots - len(self.running)
                if free <= 0:
                    self.stopping.wait(0.2)
                    continue
                # A short poll while results wait for delivery, so that they go as soon as the portal takes them.
                for job in self.portal.claim(most=free, wait=2.0 if pending else 25.0):
                    self._start(job)
                backoff = 1.0
            except PortalUnreachable as exc:
                logger.warning("portal unreachable (%s): again in %.0f s", exc, backoff)
                self.stopping.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
            except PortalRefused as exc:
                logger.error("the portal refused the agent (%s): again in %.0f s", exc, BACKOFF_MAX)
                self.stopping.wait(BACKOFF_MAX)

    def stop(self) -> None:
        """Take no more jobs and stop those in flight (each still spools what it measured until then)."""
        self.stopping.set()
        with self.lock:
            for running, _ in self.running.values():
                running.cancel()

    def drain(self, timeout: float = 15.0) -> None:
        """After stop(): give the stopped jobs `timeout` s to spool their results, and deliver what can be."""
        deadline = time.monotonic() + timeout
        while self.running and time.monotonic() < deadline:
            time.sleep(0.2)
        with contextlib.suppress(PortalUnreachable):
            self.deliver()
        logger.info("stopped: %d jobs unfinished, %d results spooled", len(self.running), len(self.spool.pending()))

    # --- jobs ------------------------------------------------------------------------------------------------------

    def _start(self, job: dict[str, Any]) -> None:
        running = Running(job)
        hung_at = time.monotonic() + float(job["hung_after"]) if job.get("hung_after") else float("inf")
        with self.lock:
            self.running[int(job["id"])] = (running, hung_at)
        threading.Thread(target=self._work, args=(running,), name=f"job-{job['id']}", daemon=True).start()

    def _work(self, running: Running) -> None:
        job = running.job
        logger.info("job %s: %s of run %s", job["id"], job["kind"], job["run"])
        try:
            result = job_run(running, self.context)
        except Exception as exc:  # a bug in the agent: the job still ends, with the reason
            logger.exception("job %s", job["id"])
            result = {"error": f"the agent failed: {exc}", "outcomes": [], "summary": {}}
        self.spool.put(int(job["id"]), int(job["attempt"]), result)  # kept before it is sent
        with self.lock:
            self.running.pop(int(job["id"]), None)
        with contextlib.suppress(PortalUnreachable):  # the loop delivers it once the portal is back
            self.deliver()

    def deliver(self) -> int:
        """Send every spooled result; returns how many are still waiting. PortalUnreachable when the portal does not
        answer (they stay for the next try)."""
        with self.delivering:
            for job_id, attempt, result in self.spool.pending():
                try:
                    stored = self.portal.result(job_id, attempt, result)
                except PortalRefused as exc:
                    if exc.status in (401, 429):
                        raise PortalUnreachable(str(exc)) from None
                    logger.error("job %s try %s: the portal refused its result for good (%s)", job_id, attempt, exc)
                    self.spool.reject(job_id, attempt)
                    continue
                logger.info("job %s: result %s", job_id, "stored" if stored else "had been stored already")
                self.spool.delivered(job_id, attempt)
            return len(self.spool.pending())

    # --- heartbeat -------------------------------------------------------------------------------------------------

    def _beat(self) -> None:
        while not self.stopping.wait(self.config.heartbeat):
            now = time.monotonic()
            with self.lock:
                alive = {job_id: running for job_id, (running, hung_at) in self.running.items() if now < hung_at}
            in_flight = [{"id": job_id, "bytes": running.bytes} for job_id, running in alive.items()]
            # Done but not delivered (the portal was away): still this agent's work, which its reaper must not take
            # for lost while the result waits to be sent.
            in_flight += [{"id": job_id, "bytes": _bytes(result)} for job_id, _, result in self.spool.pending()]
            try:
                stop = self.portal.heartbeat(kinds=list(KINDS), in_flight=in_flight)
            except (PortalUnreachable, PortalRefused) as exc:
                logger.warning("heartbeat: %s", exc)
                continue
            for job_id in stop:
                if job_id in alive:
                    logger.info("job %s: its run ended, stopping it", job_id)
                    alive[job_id].cancel()


def _bytes(result: dict[str, Any]) -> int:
    outcome = result.get("outcome")
    return int(outcome.get("bytes") or 0) if isinstance(outcome, dict) else 0
