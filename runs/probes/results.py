"""What a one-task probe measured, as its run page shows it: the figures people look for in each probe kind's
summary (iperf3 throughput per interval and its statistics, path MTU; io write vs read; cache direct, empty and
filled; staging queue and stage times, time to first file, files per hour). Read from Run.summary."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from datetime import datetime
from typing import Any

from challenges.choices import ActivityKind
from sites.matching import site_for_url
from sites.models import Site

from ..models import Run


def _interval_rates(summary: dict[str, Any]) -> list[tuple[float, float]]:
    """(seconds from the start, bytes per second) of each iperf3 interval."""
    rates = []
    for interval in (summary.get("pscheduler") or {}).get("intervals") or []:
        entry = interval.get("summary") or {}
        if "throughput-bits" in entry:
            rates.append((float(entry.get("end", 0.0)), float(entry["throughput-bits"]) / 8))
    return rates


def network_results(summary: dict[str, Any]) -> dict[str, Any]:
    """iperf3 per interval with min / average / max / standard deviation over the intervals that moved data (an
    idle interval is no sample of the link), retransmits, path MTU and its warnings."""
    intervals = _interval_rates(summary)
    active = [rate for _, rate in intervals if rate > 0]
    total = ((summary.get("pscheduler") or {}).get("summary") or {}).get("summary") or {}
    return {
        "intervals": intervals,
        "samples": len(active),
        "min": min(active) if active else None,
        "average": statistics.fmean(active) if active else None,
        "max": max(active) if active else None,
        "stdev": statistics.stdev(active) if len(active) > 1 else None,
        "rate": summary.get("rate"),
        "retransmits": total.get("retransmits"),
        "path_mtu": summary.get("path_mtu"),
        "local_mtu": summary.get("local_mtu"),
        "hops": summary.get("hops"),
        "warnings": summary.get("warnings") or [],
        "interrupted": (summary.get("pscheduler") or {}).get("interrupted"),
    }


def staging_results(summary: dict[str, Any], *, tape_limit: float | None = None) -> dict[str, Any]:
    """Per file its queue and stage time; time to first file (first request to first file online); files per
    hour over the recall's span; the files that came from tape and those online already, and the tape rate, flagged
    when it is faster than the site's drives can read (tape_limit: drives x drive rate from the registry)."""
    files = summary.get("files") or []
    rows = [
        {
            "url": item.get("source_url"),
            "ok": item.get("ok"),
            "queue_seconds": (item.get("details") or {}).get("queue_seconds"),
            "stage_seconds": (item.get("details") or {}).get("stage_seconds"),
            "error": item.get("error"),
        }
        for item in files
    ]
    start = _time(summary.get("start"))
    ends = [moment for item in files if item.get("ok") and (moment := _time(item.get("end")))]
    first = (min(ends) - start).total_seconds() if start and ends else None
    seconds = summary.get("seconds") or 0
    tape_rate = summary.get("tape_rate")
    return {
        "files_from_tape": summary.get("files_from_tape"),
        "mounts": summary.get("mounts"),
        "files_already_online": summary.get("files_already_online"),
        "files_locality_unknown": summary.get("files_locality_unknown"),
        "tape_rate": tape_rate,
        "tape_limit": tape_limit,
        # 5 % above the drives' rate: more than timing noise; such a "recall" did not come from tape alone.
        "faster_than_drives": bool(tape_rate and tape_limit and tape_rate > tape_limit * 1.05),
        "files": rows,
        "staged": summary.get("staged", 0),
        "failed": summary.get("failed", 0),
        "time_to_first_file": first,
        "files_per_hour": summary.get("staged", 0) * 3600 / seconds if seconds else None,
        "requests": len(summary.get("requests") or []),
    }


def staging_tape_limit(run: Run, match: Callable[[str], Site | None] = site_for_url) -> float | None:
    """All drives of the recalled endpoint's site together (bytes per second), from the registry; None unknown.
    `match`: how a URL finds its site (sites.matching.site_matcher for many runs)."""
    urls = (run.parameters or {}).get("urls") or [] if isinstance(run.parameters, dict) else []
    site = match(str(urls[0])) if urls else None
    capacity = getattr(site, "capacity", None) if site is not None else None
    return capacity.tape_rate if capacity is not None else None


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


def probe_results(run: Run) -> dict[str, Any] | None:
    """The run page's view of its probe's summary, by kind; None for transfer runs and probes that reported nothing."""
    summary = run.summary if isinstance(run.summary, dict) else {}
    if not summary:
        return None
    if run.kind == ActivityKind.NETWORK:
        return {"kind": "network", **network_results(summary)}
    if run.kind == ActivityKind.STAGING:
        return {"kind": "staging", **staging_results(summary, tape_limit=staging_tape_limit(run))}
    if run.kind == ActivityKind.IO:
        return {
            "kind": "io",
            "write_rate": summary.get("write_rate"),
            "read_rate": summary.get("read_rate"),
            "size": summary.get("size"),
            "endpoint": summary.get("endpoint_url"),
        }
    if run.kind == ActivityKind.CACHE:
        return {"kind": "cache", "rows": summary.get("rows") or []}
    return None
