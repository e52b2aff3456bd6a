"""A network target's figures: what its activity's iperf3 runs measured inside its window (NetworkMeasurement), not
what transfers moved. Definitions (also on "About these numbers"):

- a measurement counts for a target of its activity when it ended inside the window (by the end of `at`'s minute
  while the window runs: a run just measured counts at once) and was taken towards the target's site (a site target
  there, in or out, or a link with that site at one end), or towards a host the registry does not place (then for
  every target of the activity);
- latest = the last such measurement, best = the highest, each with its run and time; mean = their mean;
- verdict: met when the best reaches the target; otherwise, while the window runs, "below target" once measured
  and "not measured" before; after the window, missed once measured and "not measured" when no run measured it.
No volume and no projection: an iperf3 run moves what the link takes for as long as it is asked to.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from challenges.choices import ActivityKind
from challenges.models import Target

from ..choices import Verdict
from ..models import NetworkMeasurement


@dataclass(frozen=True)
class Measured:
    """One measurement as a figure: its run, its rate (B/s) and when it ended."""

    run: int
    rate: float
    at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, "rate": self.rate, "at": self.at}


@dataclass(frozen=True)
class NetworkFigures:
    """What a network target's runs measured inside its window."""

    measurements: tuple[Measured, ...]

    @property
    def latest(self) -> Measured | None:
        return max(self.measurements, key=lambda m: (m.at, m.run), default=None)

    @property
    def best(self) -> Measured | None:
        return max(self.measurements, key=lambda m: (m.rate, m.at), default=None)

    @property
    def mean_rate(self) -> float | None:
        return statistics.fmean(m.rate for m in self.measurements) if self.measurements else None

    def verdict(self, *, target_rate: float, ended: bool, started: bool) -> Verdict:
        if not started:
            return Verdict.NOT_STARTED
        best = self.best
        if best is None:
            return Verdict.NOT_MEASURED
        if best.rate >= target_rate:
            return Verdict.MET
        return Verdict.MISSED if ended else Verdict.BELOW_TARGET

    def as_dict(self) -> dict[str, Any]:
        latest, best = self.latest, self.best
        return {
            "runs": len(self.measurements),
            "latest": latest.as_dict() if latest else None,
            "best": best.as_dict() if best else None,
            "mean_rate": self.mean_rate,
        }


def is_network(target: Target) -> bool:
    return target.activity.kind == ActivityKind.NETWORK


def _covers(target: Target, site_id: int | None) -> bool:
    if site_id is None:
        return True
    if target.is_link:
        return site_id in (target.link_from_id, target.link_to_id)
    return target.site_id == site_id


def network_figures(*, targets: Sequence[Target], at: datetime) -> dict[int, NetworkFigures]:
    """The figures of the network targets among `targets` at `at` (target pk -> figures), in one query."""
    network = [target for target in targets if is_network(target)]
    if not network:
        return {}
    by_activity: dict[int, list[tuple[int, int | None, float, datetime]]] = defaultdict(list)
    for run_id, activity_id, site_id, rate, end in NetworkMeasurement.objects.filter(
        activity_id__in={target.activity_id for target in network}, end__lt=at + timedelta(minutes=1)
    ).values_list("run_id", "activity_id", "site_id", "rate", "end"):
        by_activity[activity_id].append((run_id, site_id, rate, end))
    figures = {}
    for target in network:
        activity = target.activity
        figures[target.pk] = NetworkFigures(
            tuple(
                Measured(run_id, rate, end)
                for run_id, site_id, rate, end in by_activity.get(target.activity_id, [])
                if activity.start <= end < activity.end and _covers(target, site_id)
            )
        )
    return figures
