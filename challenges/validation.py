"""The planning rules, in one place for the forms, the API and the plan document.

Each function returns every problem it finds as (field, message) pairs; an empty list means valid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from common.documents import is_number
from common.problems import Problem
from common.units import bits_per_second_text, rate_text
from sites.models import Experiment, Site

from .models import DDM_ACTIVITIES_MAX, DDM_ACTIVITY_LENGTH, target_rate_maximum

# A target's rate may differ from nominal x factors by this fraction (the plans round: 0.0967e9 x 3 ~ 0.29e9).
DERIVATION_TOLERANCE = 0.01


def serving_index() -> dict[int, set[int]]:
    """Which experiments each site serves: {site id: {experiment ids}}, in one query."""
    index: dict[int, set[int]] = {}
    for site_id, experiment_id in Site.experiments.through.objects.values_list("site_id", "experiment_id"):
        index.setdefault(site_id, set()).add(experiment_id)
    return index


EARLIEST_YEAR, LATEST_YEAR = 2000, 2100


def window_problems(*, start: datetime | None, end: datetime | None) -> list[Problem]:
    """End after start, both on a whole minute: the rollups count bytes per minute, so a window with seconds would
    have its partial minutes read from the raw records (exact, but a full scan of a site's records at scale)."""
    problems = []
    for field, moment in (("start", start), ("end", end)):
        if moment is not None and (moment.second or moment.microsecond):
            problems.append((field, f"on a whole minute, not {moment.isoformat()} (rates are kept per minute)"))
        if moment is not None and not EARLIEST_YEAR <= moment.year <= LATEST_YEAR:
            # 1970 and 9999 were stored, and the pages then overflowed computing weeks around them.
            problems.append((field, f"a year from {EARLIEST_YEAR} to {LATEST_YEAR}, not {moment.year}"))
    if start is not None and end is not None and end <= start:
        problems.append(("end", "the end must be after the start"))
    return problems


def challenge_problems(
    *, start: datetime | None, end: datetime | None, max_window: int | None, stable_window: int | None
) -> list[Problem]:
    problems = window_problems(start=start, end=end)
    for field, value in (("max_window", max_window), ("stable_window", stable_window)):
        if value is not None and (value <= 0 or value % 60):
            problems.append((field, "a positive number of seconds in whole minutes (rates are kept per minute)"))
    return problems


def activity_problems(
    *,
    challenge_start: datetime,
    challenge_end: datetime,
    start: datetime | None,
    end: datetime | None,
    experiment: Experiment | None,
    source: Site | None,
    serving: Mapping[int, set[int]],
    ddm_activities: Any = (),
) -> list[Problem]:
    """End after start, inside the challenge, a source site that serves the experiment, and DDM activity names
    that can be matched."""
    problems = window_problems(start=start, end=end)
    problems.extend(("ddm_activities", problem) for problem in ddm_activities_problems(ddm_activities))
    if start is not None and start < challenge_start:
        problems.append(("start", f"before the challenge starts ({challenge_start:%Y-%m-%d %H:%M} UTC)"))
    if end is not None and end > challenge_end:
        problems.append(("end", f"after the challenge ends ({challenge_end:%Y-%m-%d %H:%M} UTC)"))
    if source is not None and experiment is not None and experiment.pk not in serving.get(source.pk, set()):
        problems.append(("source", f"{source.name} does not serve {experiment.name}"))
    return problems


def ddm_activities_problems(names: Any) -> list[str]:
    """The FTS / Rucio activity names an activity's ingested transfers must carry: a list of up to
    DDM_ACTIVITIES_MAX distinct (ignoring case) non-blank names without spaces at either end; empty means any."""
    if names is None:
        return []
    if not isinstance(names, list | tuple):
        return [f"must be a list of DDM activity names, not {type(names).__name__}"]
    if len(names) > DDM_ACTIVITIES_MAX:
        return [f"at most {DDM_ACTIVITIES_MAX} DDM activity names, not {len(names)}"]
    problems: list[str] = []
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name.strip():
            problems.append(f"a DDM activity name is a non-empty string, not {name!r}")
        elif name != name.strip() or len(name) > DDM_ACTIVITY_LENGTH or "\x00" in name:
            problems.append(f"{name[:80]!r}: no spaces at the ends, no NUL, at most {DDM_ACTIVITY_LENGTH} characters")
        elif name.lower() in seen:
            problems.append(f"{name!r} is given twice (names are matched ignoring case)")
        else:
            seen.add(name.lower())
    return problems


def target_problems(
    *,
    experiment: Experiment | None,
    site: Site | None,
    direction: str,
    link_from: Site | None,
    link_to: Site | None,
    rate: Any,
    nominal_rate: Any,
    factors: Any,
    serving: Mapping[int, set[int]],
) -> list[Problem]:
    """A site with a direction or a link; sites that serve the experiment; a positive rate that agrees with its
    derivation. (Duplicates are checked by :func:`target_key`.)"""
    problems: list[Problem] = []
    if site is not None:
        if link_from is not None or link_to is not None:
            problems.append(("site", "either a site and a direction, or a link, not both"))
        if direction not in ("in", "out"):
            problems.append(("direction", "'in' or 'out' of the site"))
    elif link_from is None or link_to is None:
        problems.append(("site", "a site and a direction, or a link with both ends"))
    elif link_from.pk == link_to.pk:
        problems.append(("link_to", "a link joins two different sites"))
    if experiment is not None:
        for field, member in (("site", site), ("link_from", link_from), ("link_to", link_to)):
            if member is not None and experiment.pk not in serving.get(member.pk, set()):
                problems.append((field, f"{member.name} does not serve {experiment.name}"))
    if (problem := rate_problem(rate)) is not None:
        problems.append(("rate", problem))
    if factors not in (None, {}) and not (
        isinstance(factors, dict)
        and all(isinstance(key, str) and _positive_number(value) for key, value in factors.items())
    ):
        problems.append(("factors", 'named positive numbers, such as {"headroom": 1.5}'))
    elif nominal_rate is not None:
        problems.extend(_derivation_problems(rate=rate, nominal_rate=nominal_rate, factors=factors or {}))
    return problems


def rate_bound_text() -> str:
    """The bound on a target rate in human units: "10 Tb/s (1.25 TB/s)"."""
    maximum = target_rate_maximum()
    return f"{bits_per_second_text(maximum)} ({rate_text(maximum)})"


def rate_problem(rate: Any) -> str | None:
    """Why `rate` is no target rate, or None: a finite positive number of bytes per second up to TARGET_RATE_MAX.
    Every writer of a target asks this (through target_problems): the plan document, the API, the form."""
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:  # NaN is not > 0 either
        return "a positive number of bytes per second"
    if not is_number(rate) or rate > target_rate_maximum():  # Infinity, 10**400 (a form's 1e400 GB/s)
        return (
            f"{_shown(rate)} B/s is above the bound of {rate_bound_text()} a target may have "
            f"(TARGET_RATE_MAX, {target_rate_maximum():.0f} B/s)"
        )
    return None


def _derivation_problems(*, rate: Any, nominal_rate: Any, factors: dict[str, Any]) -> list[Problem]:
    """A nominal rate within the bound whose product with the factors is too, and a rate that agrees with it."""
    if (problem := rate_problem(nominal_rate)) is not None:
        return [("nominal_rate", problem)]
    derived = float(nominal_rate) * math.prod(float(value) for value in factors.values())
    if not derived > 0:  # 5e-324 x 0.1 underflows to 0, which no target may be
        return [("nominal_rate", f"nominal x factors = {derived:.4g} B/s: not a positive rate")]
    if derived > target_rate_maximum():  # inf too: 1e12 x 1e300 overflows
        return [
            (
                "nominal_rate",
                f"nominal x factors = {_shown(derived)} B/s is above the bound of {rate_bound_text()} a target may "
                f"have (TARGET_RATE_MAX)",
            )
        ]
    if _positive_number(rate) and abs(float(rate) - derived) > DERIVATION_TOLERANCE * derived:
        return [("rate", f"{float(rate):.4g} B/s differs from nominal x factors = {derived:.4g} B/s")]
    return []


def _shown(value: float) -> str:
    """A rate as the reader wrote it, short: 1.7e+308, 2e+09, inf; an integer beyond a double as more than it."""
    try:
        return f"{float(value):.4g}"
    except OverflowError:
        return "more than 1.8e+308"


def target_key(*, site: Site | None, direction: str, link_from: Site | None, link_to: Site | None) -> tuple[Any, ...]:
    """What makes a target unique within its activity."""
    if site is not None:
        return ("site", site.pk, direction)
    return ("link", getattr(link_from, "pk", None), getattr(link_to, "pk", None))


def _positive_number(value: Any) -> bool:
    return is_number(value) and value > 0
