"""What the agent does with each kind of job (runs/agents/payloads.py says what each carries): the same `measure/`
calls a portal's worker makes (runs/tasks.py; for the one-task probes measure.probes, which runs/kinds call too),
with the site's own credentials. Each returns the result the portal
stores; a failure of the probe itself is a result too (its error), never an exception out of here."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from measure.outcomes import FileOutcome, utcnow
from measure.tokens import TokenError

from .context import AgentProbeContext

Result = dict[str, Any]
_test_file_lock = threading.Lock()  # one maker of a test file at a time in this agent


class Running:
    """One job in flight: what stops it and how far it got (bytes, for the heartbeat)."""

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.cancelled = threading.Event()
        self.bytes = 0
        self.context: Any = None  # the gfal2 context of a copy, cancelled with it

    def cancel(self) -> None:
        self.cancelled.set()
        if self.context is not None:
            with contextlib.suppress(Exception):  # a context that has finished its call: nothing to stop
                self.context.cancel()


def job_run(running: Running, context: AgentProbeContext) -> Result:
    job = running.job
    handlers: dict[str, Callable[[Running, AgentProbeContext], Result]] = {
        "transfer": _transfer,
        "prepare": _prepare,
        "probe": _probe,
        "copies-delete": _copies_delete,
    }
    handler = handlers.get(str(job.get("kind")))
    if handler is None:
        return {"error": f"this agent does not know jobs of kind {job.get('kind')!r}"}
    return handler(running, context)


def _transfer(running: Running, context: AgentProbeContext) -> Result:
    from measure.stall import peers
    from measure.transfer import transfer_file

    job = running.job
    source, destination = job["source_url"], job["destination_url"]
    try:
        running.context = context.gfal2_context([tuple(grant) for grant in job.get("grants", [])])
        outcome = transfer_file(
            running.context,
            source,
            destination,
            mode=job.get("copy_mode") or None,
            streams=int(job.get("streams") or 1),
            timeout=int(job.get("timeout") or 300),
            checksum=str(job.get("checksum") or "ADLER32"),
            cancel=running.cancelled,
            progress=lambda done: setattr(running, "bytes", done),
            stall_timeout=float(job.get("stall_timeout") or 0),
            first_byte_timeout=float(job.get("first_byte_timeout") or 0),
            peers=peers,
            size=int(job.get("arrival_size") or 0),
        )
    except Exception as exc:  # no token, an odd URL, a bug: the try fails with the reason
        now = utcnow()
        outcome = FileOutcome(source, destination, 0, now, now, False, str(exc))
    return {"outcome": outcome.to_dict()}


def _prepare(running: Running, context: AgentProbeContext) -> Result:
    """A transfer run's first task: its credentials obtained, then its test file made at the source."""
    from measure.testfiles import test_file

    job = running.job
    try:
        credential = context.credential([tuple(grant) for grant in job.get("grants", [])])
    except TokenError as exc:
        return {"error": str(exc), "stage": "credential"}
    result: Result = {"error": "", "credential": credential}
    if job.get("source") and job.get("file_size"):
        try:
            with _test_file_lock:
                ctx = context.gfal2_context([tuple(grant) for grant in job.get("test_file_grants", [])])
                test_file(ctx, job["source"], int(job["file_size"]), checksum=str(job.get("checksum") or "ADLER32"))
        except Exception as exc:  # gfal2.GError and friends
            result |= {"error": str(getattr(exc, "message", "") or exc), "stage": "test_file"}
    return result


def _probe(running: Running, context: AgentProbeContext) -> Result:
    """A one-task probe (staging, network, cache, io): measure.probes' function for its kind, the one a portal's
    worker runs (runs/kinds/*.py `probe`), given the kind's parameters from the job's payload."""
    from measure.probes import PROBES, probe_run

    job = running.job
    name = str(job.get("probe"))
    if name not in PROBES:
        return {"outcomes": [], "summary": {}, "error": f"this agent has no probe for runs of kind {name}"}
    grants = [(str(url), str(access)) for url, access in job.get("grants", [])]
    try:
        credential = context.credential(grants)
        outcomes, summary, error = probe_run(name, context, grants, running.cancelled, job["parameters"])
    except Exception as exc:  # the probe's own failure ends the run with its reason
        return {"outcomes": [], "summary": {}, "error": f"{name} probe failed: {exc}"}
    return {
        "outcomes": [outcome.to_dict() for outcome in outcomes],
        "summary": summary,
        "error": error,
        "credential": credential,
    }


def _grants(running: Running) -> list[tuple[str, str]]:
    return [(str(url), str(access)) for url, access in running.job.get("grants", [])]


def _copies_delete(running: Running, context: AgentProbeContext) -> Result:
    from measure.cleanup import copies_delete

    job = running.job
    try:
        ctx = context.gfal2_context(_grants(running))
        result = copies_delete(ctx, list(job.get("urls", [])), list(job.get("directories", [])))
    except Exception as exc:  # no credential to delete with: the copies stay, and the run says why
        return {"deleted": 0, "errors": [f"could not delete: {exc}"]}
    return {"deleted": result.deleted, "errors": result.errors}
