"""A target while its window runs: what it still needs and where it is heading (the now board's and the results
table's live verdict). Definitions, also on "About these numbers":

- window = [A, B), at = now (the board's minute); elapsed = at - A, remaining = B - at, both in seconds;
- volume = bytes of the target's flow inside [A, at) (so far);
- required rate = (target rate x (B - A) - volume) / remaining: what the rest of the window must average;
- projected average = (volume + last hour's rate x remaining) / (B - A): the window's average if the last hour's
  rate holds to the end;
- verdict: "not started" before A; "met" once the volume alone reaches target rate x (B - A); "on track" when the
  projection reaches the target; "at risk" when it reaches at_risk_fraction of it (default 0.8); "will miss" below;
  after B the final verdict of results.targets.rates (met, partly, missed) stands instead.
Rates are bytes per second.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..choices import Verdict


@dataclass(frozen=True)
class Projection:
    """Where a target stands at `at`: the verdict and the two rates behind it (None where they mean nothing)."""

    verdict: Verdict | None  # None once the window has ended: the final verdict stands
    required_rate: float | None
    projected_average_rate: float | None


def target_projection(
    *,
    target_rate: float,
    start: datetime,
    end: datetime,
    at: datetime,
    volume: float,
    last_hour_rate: float,
    at_risk_fraction: float = 0.8,
) -> Projection:
    """The live verdict of a target of `target_rate` over [start, end) at `at`, from its volume so far and the last
    hour's rate (see the module's definitions)."""
    if at < start:
        return Projection(Verdict.NOT_STARTED, None, None)
    window = (end - start).total_seconds()
    if at >= end or window <= 0:
        return Projection(None, None, volume / window if window > 0 else None)
    remaining = (end - at).total_seconds()
    needed = target_rate * window
    required = max(needed - volume, 0.0) / remaining
    projected = (volume + last_hour_rate * remaining) / window
    if volume >= needed:
        verdict = Verdict.MET
    elif projected >= target_rate:
        verdict = Verdict.ON_TRACK
    elif projected >= at_risk_fraction * target_rate:
        verdict = Verdict.AT_RISK
    else:
        verdict = Verdict.WILL_MISS
    return Projection(verdict, required, projected)


@dataclass(frozen=True)
class SoFar:
    """A target of the results table whose window has not ended, at the minute `at`: its numbers so far (over the
    elapsed part of its window) and its live verdict, never "missed" before the end."""

    at: datetime
    elapsed_seconds: float
    volume: float
    last_hour_rate: float
    projection: Projection
    last_15min_rate: float = 0.0

    @property
    def average_rate(self) -> float:
        return self.volume / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0
