"""The rollups' rows in one comparable form, for tests that check what a writer left in them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from results.models import FlowRollup, RateRollup, RateRollupHour

RATE_KEY = ("experiment_id", "activity_id", "source_site_id", "destination_site_id", "mode", "concurrency")
FLOW_KEY = ("experiment_id", "activity_id", "flow", "site_id", "peer_id")


def rollup_rows() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the three rollups as (time, *key, bytes, files ok, files failed), FlowRollup's arrays opened into
    one row per minute; rows (or minutes) that hold nothing are left out, so that a row emptied by taking records
    out equals no row."""
    tables: dict[str, list[tuple[Any, ...]]] = {"rate": [], "rate_hour": [], "flow": []}
    for name, model, time in (("rate", RateRollup, "minute"), ("rate_hour", RateRollupHour, "hour")):
        for row in model.objects.values_list(time, *RATE_KEY, "bytes", "files_ok", "files_failed"):
            if abs(row[-3]) > 1e-3 or row[-2] or row[-1]:
                tables[name].append(row)
    for flow in FlowRollup.objects.all():
        assert flow.hour_files_ok == sum(flow.files_ok) and flow.hour_files_failed == sum(flow.files_failed)
        for minute, (moved, ok, failed) in enumerate(zip(flow.bytes, flow.files_ok, flow.files_failed, strict=True)):
            if abs(moved) > 1e-3 or ok or failed:
                key = tuple(getattr(flow, name) for name in FLOW_KEY)
                tables["flow"].append((flow.hour + timedelta(minutes=minute), *key, moved, ok, failed))
    return {name: sorted(rows, key=repr) for name, rows in tables.items()}
