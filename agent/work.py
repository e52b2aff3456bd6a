"""What the agent does with each kind of job (runs/agents/payloads.py says what each carries): the same `measure/`
calls a portal's worker makes (runs/tasks.py), with the site's own credentials. Each returns the result the portal
stores; a failure of the probe itself is a result too (its error), never an exception out of here."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

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
    """A one-task probe (staging, network, cache, io), as runs/tasks.py runs it on a portal's worker."""
    job = running.job
    probes = {"staging": _staging, "network": _network, "cache": _cache, "io": _io}
    probe = probes.get(str(job.get("probe")))
    if probe is None:
        return {"outcomes": [], "summary": {}, "error": f"this agent has no probe for runs of kind {job.get('probe')}"}
    try:
        credential = context.credential([tuple(grant) for grant in job.get("grants", [])])
        outcomes, summary, error = probe(running, context)
    except Exception as exc:  # the probe's own failure ends the run with its reason
        return {"outcomes": [], "summary": {}, "error": f"{job.get('probe')} probe failed: {exc}"}
    return {
        "outcomes": [outcome.to_dict() for outcome in outcomes],
        "summary": summary,
        "error": error,
        "credential": credential,
    }


ProbeResult = tuple[list[FileOutcome], dict[str, Any], str]


def _grants(running: Running) -> list[tuple[str, str]]:
    return [(str(url), str(access)) for url, access in running.job.get("grants", [])]


def _network(running: Running, context: AgentProbeContext) -> ProbeResult:
    from measure.network import network_probe

    parameters = running.job["parameters"]
    network = network_probe(
        parameters["host"],
        int(parameters["port"]),
        streams=int(parameters.get("streams") or 1),
        duration=int(parameters.get("duration") or 10),
        reverse=bool(parameters.get("reverse")),
        cancel=running.cancelled,
    )
    error = "" if network.ok else f"network probe failed: {network.error}"
    return [], network.to_dict(), error


def _staging(running: Running, context: AgentProbeContext) -> ProbeResult:
    from measure.staging import stage_files

    parameters = running.job["parameters"]
    staging = stage_files(
        context.gfal2_context(_grants(running)),
        list(parameters["urls"]),
        bulk_size=int(parameters["bulk_size"]),
        pin_time=int(parameters["pin_time"]),
        timeout=float(parameters["timeout"]),
        poll_interval=float(parameters["poll_interval"]),
        cancel=running.cancelled,
    )
    summary = staging.to_dict()
    summary["mounts"] = None  # a site sees no tape system's mounts
    return list(staging.files), summary, ""


def _cache(running: Running, context: AgentProbeContext) -> ProbeResult:
    from measure.cache import cache_study

    parameters = running.job["parameters"]
    cache = urlsplit(str(parameters["cache_url"]))

    def cache_url_of(origin_url: str) -> str:
        origin = urlsplit(origin_url)
        return urlunsplit((cache.scheme, cache.netloc, origin.path, origin.query, ""))

    result = cache_study(
        context.gfal2_context(_grants(running)),
        list(parameters["origin_urls"]),
        cache_url_of=cache_url_of,
        flush=lambda: context.cache_flush(str(parameters["cache_url"])),
    )
    return list(result.files), result.to_dict(), ""


def _io(running: Running, context: AgentProbeContext) -> ProbeResult:
    from measure.io import io_probe

    parameters = running.job["parameters"]
    result = io_probe(
        context.gfal2_context(_grants(running)),
        parameters["endpoint"],
        int(parameters["file_size"]),
        timeout=int(parameters["timeout"]),
    )
    return list(result.files), result.to_dict(), ""


def _copies_delete(running: Running, context: AgentProbeContext) -> Result:
    from measure.cleanup import copies_delete

    job = running.job
    try:
        ctx = context.gfal2_context(_grants(running))
        result = copies_delete(ctx, list(job.get("urls", [])), list(job.get("directories", [])))
    except Exception as exc:  # no credential to delete with: the copies stay, and the run says why
        return {"deleted": 0, "errors": [f"could not delete: {exc}"]}
    return {"deleted": result.deleted, "errors": result.errors}
