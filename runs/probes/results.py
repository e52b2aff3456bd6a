"""What a one-task probe measured, as its run page shows it: its kind's reading of Run.summary (runs.kinds: iperf3
throughput per interval and its statistics, path MTU; io write vs read; cache direct, empty and filled; staging
queue and stage times, time to first file, files per hour)."""

from __future__ import annotations

from typing import Any

from ..kinds.registry import kind_for
from ..models import Run


def probe_results(run: Run) -> dict[str, Any] | None:
    """The run page's view of its probe's summary, by kind; None for transfer runs and probes that reported nothing."""
    summary = run.summary if isinstance(run.summary, dict) else {}
    kind = kind_for(run.kind)
    if not summary or kind is None:
        return None
    return kind.results(run, summary)
