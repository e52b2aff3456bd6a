"""The one-task probes (network, staging, cache, io) as one function each, run the same way by the portal's workers
(runs/kinds/*.py `probe`, with a kind's typed parameters) and by a site's agent (agent/work.py, with a job's
payload: the kind's `to_dict`). Each takes the place's probe context, the grants its credentials cover, the event
that stops it, and the kind's parameters by name; it returns the files it measured, the run's summary and an
error ("" when it worked). Plain Python, no Django.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .context import ProbeContext
from .outcomes import FileOutcome

Grants = Sequence[tuple[str, str]]
ProbeResult = tuple[list[FileOutcome], dict[str, Any], str]


def network_run(
    context: ProbeContext,
    grants: Grants,
    cancel: threading.Event,
    *,
    host: str,
    port: int,
    streams: int = 1,
    duration: int = 10,
    reverse: bool = False,
) -> ProbeResult:
    """iperf3 to host:port, then tracepath (measure.network)."""
    from .network import network_probe

    network = network_probe(
        host, int(port), streams=int(streams or 1), duration=int(duration or 10), reverse=bool(reverse), cancel=cancel
    )
    error = "" if network.ok else f"network probe failed: {network.error}"
    return [], network.to_dict(), error


def staging_run(
    context: ProbeContext,
    grants: Grants,
    cancel: threading.Event,
    *,
    urls: Sequence[str],
    bulk_size: int,
    pin_time: int,
    timeout: float,
    poll_interval: float,
) -> ProbeResult:
    """A recall of `urls` from tape (measure.staging), with the tape's mounts meanwhile where the place sees them
    (its context's `tape_mounts`; None where it does not, as at a site)."""
    from .staging import stage_files

    files = list(urls)
    mounts_before = context.tape_mounts(files[0]) if files else None
    staging = stage_files(
        context.gfal2_context(grants),
        files,
        bulk_size=int(bulk_size),
        pin_time=int(pin_time),
        timeout=float(timeout),
        poll_interval=float(poll_interval),
        cancel=cancel,
    )
    mounts_after = context.tape_mounts(files[0]) if files else None
    summary = staging.to_dict()
    # Mounts while it recalled, where the deployment sees them (other recalls at once count too).
    known = mounts_before is not None and mounts_after is not None
    summary["mounts"] = mounts_after - mounts_before if known else None  # type: ignore[operator]
    return list(staging.files), summary, ""


def cache_url_of(cache_url: str) -> Callable[[str], str]:
    """origin URL -> the same path through the cache endpoint."""
    cache = urlsplit(cache_url)

    def through_cache(origin_url: str) -> str:
        origin = urlsplit(origin_url)
        return urlunsplit((cache.scheme, cache.netloc, origin.path, origin.query, ""))

    return through_cache


def cache_run(
    context: ProbeContext, grants: Grants, cancel: threading.Event, *, cache_url: str, origin_urls: Sequence[str]
) -> ProbeResult:
    """The origin files read direct, then through the emptied and the filled cache (measure.cache)."""
    from .cache import cache_study

    result = cache_study(
        context.gfal2_context(grants),
        list(origin_urls),
        cache_url_of=cache_url_of(cache_url),
        flush=lambda: context.cache_flush(cache_url),
    )
    return list(result.files), result.to_dict(), ""


def io_run(
    context: ProbeContext, grants: Grants, cancel: threading.Event, *, endpoint: str, file_size: int, timeout: int
) -> ProbeResult:
    """A file written to the endpoint, then read back (measure.io)."""
    from .io import io_probe

    result = io_probe(context.gfal2_context(grants), endpoint, int(file_size), timeout=int(timeout))
    return list(result.files), result.to_dict(), ""


PROBES: dict[str, Callable[..., ProbeResult]] = {
    "network": network_run,
    "staging": staging_run,
    "cache": cache_run,
    "io": io_run,
}


def probe_run(
    name: str, context: ProbeContext, grants: Grants, cancel: threading.Event, parameters: Mapping[str, Any]
) -> ProbeResult:
    """The probe `name` given the fields of `parameters` it takes (a job's payload holds the kind's whole
    `to_dict`: its site and queue too). KeyError for a probe this code does not have."""
    probe = PROBES[name]
    taken = {p.name for p in inspect.signature(probe).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    return probe(context, grants, cancel, **{key: value for key, value in parameters.items() if key in taken})
