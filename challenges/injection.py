"""Rucio load injection plans from the clock: one plan per link of each activity that moves data between sites.

Rucio's load injector (rucio/rucio PR #8730, issue #8593) keeps one plan per RSE pair in `load_injection_plans`.
This module reads the plan and the registry and gives those plans: the RSEs of the activity's experiment at each
end (the source's disk RSE; the destination's tape RSE for a tape write, else its disk RSE), the target's rate and
the activity's window, and the injector's settings (Rucio's client defaults, overridden per activity by the
`injection` mapping of the plan document, which this module also checks).

Units: Rucio's client docstring says `inject_rate` is MB/s, but its submitter daemon (and its CLI's `--mbps`) read
it as megabits per second. The plans give Mbps as the submitter reads it, `bytes/s x 8 / 10^6`, rounded to a whole
number (Rucio takes an integer), and the rate in bytes per second beside it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from common.documents import is_number
from sites.matching import experiments_served
from sites.models import Site, StorageEndpoint

from . import validation
from .choices import ActivityKind
from .models import Activity, Challenge, Target
from .selectors import challenge_activities

UNIT_NOTE = (
    "Rucio's client docstring says MB/s, its submitter reads Mbps: this file gives Mbps = bytes/s x 8 / 10^6 "
    "(inject_rate), with inject_rate_bytes in bytes/s beside it."
)

# The injector's settings that an activity may override, with Rucio's client defaults (its CLI's CSV: interval
# 900), except dry_run: a plan the portal writes is a dry run until someone decides otherwise.
INJECTION_DEFAULTS: dict[str, Any] = {
    "interval": 900,
    "fudge": 0.0,
    "max_injection": 0.2,
    "expiration_delay": 1800,
    "rule_lifetime": 3600,
    "big_first": False,
    "dry_run": True,
    "comments": None,  # None: "<challenge>: <activity>"
}
INJECTION_KEYS = tuple(INJECTION_DEFAULTS)
# The bounds Rucio's gateway checks (`_validate_plan_params`), so that a plan the portal gives is one Rucio takes.
_INTEGER_BOUNDS = {"interval": (1, 86400), "expiration_delay": (0, 604800), "rule_lifetime": (1, 604800)}
_FRACTION_KEYS = ("fudge", "max_injection")
_BOOLEAN_KEYS = ("big_first", "dry_run")
COMMENTS_LENGTH = 4000  # Rucio's `comments` column
INJECT_RATE_MAXIMUM = 1_000_000  # Mbps, Rucio's gateway limit

# Rucio's CLI (`rucio loadinjection add --csv-file`, lib/rucio/cli/loadinjection.py `_normalize_csv`) reads a CSV
# with a header through csv.DictReader; any other column is refused ("Unknown CSV column"), so these and only
# these, in the order of its `_build_plan`. Times are "YYYY-MM-DD HH:MM:SS" UTC (its gateway's only format),
# inject_rate an integer, booleans true/false.
RUCIO_CSV_COLUMNS = (
    "src_rse",
    "dest_rse",
    "inject_rate",
    "start_time",
    "end_time",
    "interval",
    "fudge",
    "max_injection",
    "expiration_delay",
    "rule_lifetime",
    "big_first",
    "dry_run",
    "comments",
)
RUCIO_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

# Activities that move data between sites; a tape write lands on the destination's tape RSE.
MOVING_KINDS = (ActivityKind.TRANSFER.value, ActivityKind.TAPE_WRITE.value)
DT_MODE = "DT"


def injection_settings_problems(value: Any) -> list[tuple[str, str]]:
    """What is wrong with an activity's `injection` mapping, as (place below the activity, reason) pairs."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [("injection", f"must be a mapping of {', '.join(INJECTION_KEYS)}")]
    problems: list[tuple[str, str]] = []
    for key, given in value.items():
        place = f"injection.{key}"
        if key not in INJECTION_DEFAULTS:
            problems.append((place, f"unknown key; allowed: {', '.join(INJECTION_KEYS)}"))
        elif (problem := _setting_problem(str(key), given)) is not None:
            problems.append((place, problem))
    return problems


def _setting_problem(key: str, value: Any) -> str | None:
    if key in _INTEGER_BOUNDS:
        low, high = _INTEGER_BOUNDS[key]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            return f"must be an integer from {low} to {high} (seconds), not {value!r}"
    elif key in _FRACTION_KEYS:
        if not is_number(value) or not 0 <= value <= 1:
            return f"must be a number from 0 to 1, not {value!r}"
    elif key in _BOOLEAN_KEYS:
        if not isinstance(value, bool):
            return f"must be true or false, not {value!r}"
    elif not isinstance(value, str) or len(value) > COMMENTS_LENGTH:
        return f"must be text of at most {COMMENTS_LENGTH} characters"
    return None


@dataclass(frozen=True)
class InjectionPlan:
    """One Rucio load injection plan: an RSE pair at a rate over the activity's window."""

    activity: str
    experiment: str
    source: str
    destination: str
    src_rse: str
    dest_rse: str
    inject_rate: int  # Mbps as Rucio's submitter reads it
    inject_rate_bytes: float  # bytes per second
    start_time: datetime
    end_time: datetime
    interval: int
    fudge: float
    max_injection: float
    expiration_delay: int
    rule_lifetime: int
    big_first: bool
    dry_run: bool
    comments: str

    def csv_row(self) -> dict[str, Any]:
        """The plan as a row of the CSV Rucio's CLI imports."""
        row = {column: getattr(self, column) for column in RUCIO_CSV_COLUMNS}
        row["start_time"] = self.start_time.astimezone(UTC).strftime(RUCIO_TIME_FORMAT)
        row["end_time"] = self.end_time.astimezone(UTC).strftime(RUCIO_TIME_FORMAT)
        row["big_first"] = "true" if self.big_first else "false"
        row["dry_run"] = "true" if self.dry_run else "false"
        return row


@dataclass(frozen=True)
class InjectionProblem:
    """A link of the plan that gives no injection plan, and what to do about it."""

    activity: str
    experiment: str
    place: str
    problem: str


def inject_rate_mbps(rate: float) -> int:
    """Bytes per second as Rucio's submitter reads `inject_rate`: megabits per second (125000 B/s = 1 Mbps),
    rounded to the integer Rucio stores. A rate that is not finite has no such integer: ValueError (the rules keep
    every target's rate finite, and a row stored before them is read finite: challenges.models.Target.from_db)."""
    mbps = rate * 8 / 1e6
    if not math.isfinite(mbps):
        raise ValueError(f"{rate!r} B/s is not a finite rate: no Mbps to give Rucio")
    return round(mbps)


def is_tape_write(activity: Activity) -> bool:
    """A tape write (kind tape-write, or mode DT) lands on the destination's tape RSE."""
    return activity.kind == ActivityKind.TAPE_WRITE or activity.mode.strip().upper() == DT_MODE


def injection_plans(*, challenge: Challenge, user: Any) -> tuple[list[InjectionPlan], list[InjectionProblem]]:
    """The challenge's injection plans that `user` may read (a DDM service: its experiment's), and the links that
    give none with the reason. In a constant number of queries (five)."""
    activities = [
        activity
        for activity in challenge_activities(challenge=challenge, user=user).order_by("start", "experiment__name", "pk")
        if activity.kind in MOVING_KINDS
    ]
    links = [(activity, link) for activity in activities for link in _links(activity)]
    rses = _RseIndex({site.pk for _, (_, source, destination) in links for site in (source, destination) if site})
    plans: list[InjectionPlan] = []
    problems: list[InjectionProblem] = []
    for activity, link in links:
        result = _plan(challenge, activity, link, rses)
        if isinstance(result, InjectionPlan):
            plans.append(result)
        else:
            problems.append(result)
    problems.extend(_pair_repeats(plans))
    return plans, problems


_Link = tuple[Target, Site | None, Site | None]  # (target, source, destination)


def _links(activity: Activity) -> list[_Link]:
    """(target, source, destination) of each target that names a link: a link target, or a site's `in`."""
    links: list[_Link] = []
    for target in activity.targets.all():
        if target.is_link:
            links.append((target, target.link_from, target.link_to))
        elif target.direction == "in":
            links.append((target, activity.source, target.site))
    return links


def _plan(challenge: Challenge, activity: Activity, link: _Link, rses: _RseIndex) -> InjectionPlan | InjectionProblem:
    target, source, destination = link
    experiment = activity.experiment
    place = f"{source or '?'} -> {destination}"

    def problem(reason: str) -> InjectionProblem:
        return InjectionProblem(activity=activity.name, experiment=experiment.name, place=place, problem=reason)

    if source is None or destination is None:
        return problem(f"a target at {destination} in needs the activity's source site: give the activity a source")
    if source.pk == destination.pk:
        return problem("the source and the destination are the same site")
    dest_kind = "tape" if is_tape_write(activity) else "disk"
    missing = [
        rses.missing(site=site, kind=kind, experiment_id=experiment.pk, experiment_name=experiment.name)
        for site, kind in ((source, "disk"), (destination, dest_kind))
        if rses.rse(site=site, kind=kind, experiment_id=experiment.pk) is None
    ]
    if missing:
        return problem("; ".join(missing))
    if "rate" in target.stored_out_of_range:
        return problem(
            f"the stored rate {target.stored_out_of_range['rate']!r} B/s is no rate (it was written before the rules "
            f"bounded rates): import the plan again with a rate of at most {validation.rate_bound_text()}"
        )
    rate = inject_rate_mbps(target.rate)
    if not 1 <= rate <= INJECT_RATE_MAXIMUM:
        return problem(f"{rate} Mbps is outside what Rucio takes (1 to {INJECT_RATE_MAXIMUM} Mbps)")
    settings = {**INJECTION_DEFAULTS, **(activity.injection or {})}
    return InjectionPlan(
        activity=activity.name,
        experiment=experiment.name,
        source=source.name,
        destination=destination.name,
        src_rse=rses.rse(site=source, kind="disk", experiment_id=experiment.pk),  # type: ignore[arg-type]
        dest_rse=rses.rse(site=destination, kind=dest_kind, experiment_id=experiment.pk),  # type: ignore[arg-type]
        inject_rate=rate,
        inject_rate_bytes=target.rate,
        start_time=activity.start,
        end_time=activity.end,
        interval=settings["interval"],
        fudge=float(settings["fudge"]),
        max_injection=float(settings["max_injection"]),
        expiration_delay=settings["expiration_delay"],
        rule_lifetime=settings["rule_lifetime"],
        big_first=settings["big_first"],
        dry_run=settings["dry_run"],
        comments=settings["comments"] or f"{challenge.slug}: {activity.name} ({experiment.name} {place})",
    )


def _pair_repeats(plans: list[InjectionPlan]) -> list[InjectionProblem]:
    """Rucio keeps one plan per RSE pair: a pair planned twice cannot be imported at once."""
    first: dict[tuple[str, str], InjectionPlan] = {}
    problems: list[InjectionProblem] = []
    for plan in plans:
        pair = (plan.src_rse, plan.dest_rse)
        if pair in first:
            reason = (
                f"Rucio keeps one plan per RSE pair: {plan.src_rse} -> {plan.dest_rse} is also planned by "
                f"{first[pair].activity}; import one of them, and the other when it has ended"
            )
            place = f"{plan.source} -> {plan.destination}"
            problems.append(InjectionProblem(plan.activity, plan.experiment, place, reason))
        else:
            first[pair] = plan
    return problems


class _RseIndex:
    """The registry's RSEs of some sites, by site, endpoint kind and experiment (three queries)."""

    def __init__(self, site_ids: set[int]) -> None:
        endpoints = (
            StorageEndpoint.objects.filter(site_id__in=site_ids)
            .exclude(rse_names=[])
            .prefetch_related("experiments")
            .order_by("url")
        )
        self._endpoints: dict[tuple[int, str], list[StorageEndpoint]] = defaultdict(list)
        for endpoint in endpoints:
            self._endpoints[(endpoint.site_id, endpoint.kind)].append(endpoint)
        self._site_experiments: dict[int, set[int]] = defaultdict(set)
        for site_id, experiment_id in Site.experiments.through.objects.filter(site_id__in=site_ids).values_list(
            "site_id", "experiment_id"
        ):
            self._site_experiments[site_id].add(experiment_id)

    def rse(self, *, site: Site, kind: str, experiment_id: int) -> str | None:
        """The first RSE of an endpoint of this kind that serves the experiment (sites.matching.experiments_served),
        one that names it before one that serves all of its site's."""
        named: list[StorageEndpoint] = []
        general: list[StorageEndpoint] = []
        for endpoint in self._endpoints[(site.pk, kind)]:
            served = [experiment.pk for experiment in endpoint.experiments.all()]
            if experiment_id in experiments_served(named=served, of_site=self._site_experiments[site.pk]):
                (named if served else general).append(endpoint)
        chosen = (named or general)[:1]
        return chosen[0].rse_names[0] if chosen else None

    def missing(self, *, site: Site, kind: str, experiment_id: int, experiment_name: str) -> str:
        """What to add to the registry for `rse` to find an RSE."""
        reason = (
            f"no {kind} RSE of {experiment_name} at {site}: in the registry, give a {kind} endpoint of {site} that "
            f"serves {experiment_name} an `rse` (an endpoint's `experiments` names the experiments it serves; "
            f"empty, all of its site's)"
        )
        if experiment_id not in self._site_experiments[site.pk]:
            reason += f", and add {experiment_name} to {site}'s experiments"
        return reason


def injection_csv_rows(*, plans: list[InjectionPlan]) -> list[dict[str, Any]]:
    """The plans as the rows of the CSV Rucio's CLI imports (columns RUCIO_CSV_COLUMNS)."""
    return [plan.csv_row() for plan in plans]


def injection_plan_dict(plan: InjectionPlan) -> dict[str, Any]:
    """A plan as the API and the JSON export give it (times as datetimes, for the caller to render)."""
    return {name: getattr(plan, name) for name in InjectionPlan.__dataclass_fields__}


def injection_problem_dict(problem: InjectionProblem) -> dict[str, Any]:
    return {name: getattr(problem, name) for name in InjectionProblem.__dataclass_fields__}
