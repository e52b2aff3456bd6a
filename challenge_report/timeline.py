"""The week as it happened (alerts opened, acknowledged and resolved, site outages and actions, on one timeline)
and the network's FROM x TO tables of the challenge's sweeps (sweeps.grids, as the JUNO slides laid them out)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q

from challenges.models import Challenge
from live.selectors import alerts_visible
from sweeps.grids import Grid, functional_grids, network_grid, throughput_grids
from sweeps.selectors import sweeps_visible_to
from sweeps.tables import matrix_rows, network_rows, steps_of

MAX_ALERTS = 500  # the timeline of a long, noisy week keeps its newest alerts' events


def _alert_events(*, challenge: Challenge, user: Any, at: datetime) -> list[dict[str, Any]]:
    """What the alerts did before `at` (the end of the report's window, content.events_window): opened, and
    acknowledged or resolved only when that too happened before it."""
    events = []
    for alert in alerts_visible(user=user, challenge=challenge).filter(started_at__lt=at)[:MAX_ALERTS]:
        about = alert.get_kind_display()
        for moment, what in (
            (alert.started_at, "alert opened"),
            (alert.acknowledged_at, "alert acknowledged"),
            (alert.resolved_at, "alert resolved"),
        ):
            if moment is not None and moment < at:
                who = alert.acknowledged_by if what == "alert acknowledged" else None
                text = f"{about}: {alert.message}" + (f" (by {who})" if who else "")
                events.append({"at": moment, "kind": what, "subject": alert.subject, "text": text})
    return events


def timeline_section(*, challenge: Challenge, user: Any, sites: list[dict[str, Any]], at: datetime) -> list[dict]:
    """Every event up to `at`, oldest first: the alerts' and, from the sites' reports, outages and actions."""
    events = _alert_events(challenge=challenge, user=user, at=at)
    for site in sites:
        report = site["report"] or {}
        for outage in report.get("outages", []):
            events.append({"at": outage["start"], "kind": "outage began", "subject": site["site"],
                           "text": outage["reason"]})  # fmt: skip
            events.append({"at": outage["end"], "kind": "outage ended", "subject": site["site"],
                           "text": outage["reason"]})  # fmt: skip
        for action in report.get("actions", []):
            if action["taken_at"] is not None:
                events.append({"at": action["taken_at"], "kind": "site action", "subject": site["site"],
                               "text": action["description"]})  # fmt: skip
    return sorted(events, key=lambda event: (event["at"], event["kind"], event["subject"]))


def grid_dict(grid: Grid) -> dict[str, Any]:
    """A FROM x TO table as plain data: sources down, destinations across, a cell (a row of sweeps.tables) or
    null."""
    return {
        "title": grid.title,
        "mode": grid.mode,
        "concurrency": grid.concurrency,
        "destinations": grid.destinations,
        "rows": [{"source": source, "cells": cells} for source, cells in grid.lines()],
    }


def network_section(*, challenge: Challenge, user: Any) -> list[dict[str, Any]]:
    """The sweeps of the challenge (of its activities, or of none and started inside its window) that the reader
    may read, oldest first, each with its functional, throughput and iperf3 / MTU tables."""
    inside = Q(activity__isnull=True, started_at__gte=challenge.start, started_at__lt=challenge.end)
    sweeps = sweeps_visible_to(user=user).filter(Q(activity__challenge=challenge) | inside).order_by("created_at")
    section = []
    for sweep in sweeps:
        steps = steps_of(sweep)
        rows, net = matrix_rows(sweep, steps), network_rows(sweep, steps)
        network = network_grid(net)
        section.append(
            {
                "sweep": sweep.name,
                "id": sweep.pk,
                "state": sweep.state,
                "started_at": sweep.started_at,
                "finished_at": sweep.finished_at,
                "functional": [grid_dict(grid) for grid in functional_grids(rows)] if rows else [],
                "throughput": [grid_dict(grid) for grid in throughput_grids(rows)] if rows else [],
                "network": grid_dict(network) if network else None,
                # where its steps were measured (sweeps.tables.step_measured_by), each way once
                "measured_by": sorted({row["measured_by"] for row in [*rows, *net] if row["measured_by"]}),
            }
        )
    return section
