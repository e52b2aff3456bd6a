"""The live alerts' thresholds (live/alerts.py reads them): the defaults (the perfSONAR / AAAS practice for drops),
and a challenge's own where its plan document sets them (`alerts:` in the plan; stored in
Challenge.alert_thresholds). Kept with the plan, which checks them."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from common.documents import is_number

from .models import Challenge


@dataclass(frozen=True)
class Thresholds:
    """When a running challenge's numbers make an alert. Fractions are of a rate; times in minutes."""

    at_risk_fraction: float = 0.8  # projected average below this x target: "will miss" (above: "at risk")
    drop_fraction: float = 0.5  # the last 15 minutes below this x the mean of the hour before them: a drop
    drop_minutes: int = 15  # the recent part compared
    drop_baseline_minutes: int = 60  # the hour before it
    site_multi_drop_links: int = 3  # this many links of one site dropping at once: one alert for the site
    no_traffic_minutes: int = 15  # a running target that had traffic and saw no transfer end for this long
    failure_min_attempts: int = 20  # a link's attempts in the last failure_minutes before a ratio counts
    failure_ratio: float = 0.5
    failure_minutes: int = 15
    source_silent_minutes: int = 15  # a DDM source that sent in the past hour and nothing for this long
    resolve_after_minutes: int = 10  # an open alert resolves once its condition has been false this long


THRESHOLD_NAMES = tuple(field.name for field in fields(Thresholds))
# Whole-number thresholds stay where their arithmetic does: minutes within a week (a timedelta of 10**30 minutes
# overflows), counts within a million.
THRESHOLD_MINUTES_MAX = 7 * 24 * 60
THRESHOLD_COUNT_MAX = 1_000_000


def thresholds_problems(value: Any) -> list[str]:
    """What is wrong with a plan document's `alerts` section (empty when nothing): known names, positive numbers,
    fractions between 0 and 1."""
    if not isinstance(value, dict):
        return [f"alerts must be a mapping of threshold names to numbers ({', '.join(THRESHOLD_NAMES)})"]
    problems = []
    defaults = Thresholds()
    for name, given in value.items():
        if name not in THRESHOLD_NAMES:
            problems.append(f"unknown alert threshold {name!r} (known: {', '.join(THRESHOLD_NAMES)})")
            continue
        kind = type(getattr(defaults, name))
        if not is_number(given) or (kind is int and given != int(given)):
            problems.append(f"{name} must be a {'whole number' if kind is int else 'number'}, not {given!r}")
        elif given <= 0 or (name.endswith(("fraction", "ratio")) and given > 1):
            problems.append(f"{name} must be {'between 0 and 1' if kind is float else 'positive'}, not {given!r}")
        elif kind is int and given > (maximum := _whole_maximum(name)):
            unit = " (a week)" if name.endswith("_minutes") else ""
            problems.append(f"{name} must be at most {maximum}{unit}, not {given!r}")
    return problems


def _whole_maximum(name: str) -> int:
    return THRESHOLD_MINUTES_MAX if name.endswith("_minutes") else THRESHOLD_COUNT_MAX


def challenge_thresholds(*, challenge: Challenge) -> Thresholds:
    """The thresholds of a challenge: its plan's where it sets them, the defaults elsewhere."""
    given = {name: value for name, value in (challenge.alert_thresholds or {}).items() if name in THRESHOLD_NAMES}
    return Thresholds(**given)
