"""The challenge report's structured content: the JSON every other format (HTML, PDF, Markdown) is rendered from.
It follows the Tape Challenge '22 report's outline, from the portal's data, for what the reader may read:

introduction (from the plan) - the experiments' perspective (targets' table: the rates API's rows; rate plots; the
failure anatomy; the experiment's narrative) - central services (FTS's optimizer per link, failures in FTS's scheme,
Rucio injection plans) - the sites' perspective (traffic in and out, tape, outages, problems and tickets, actions) -
the week as it happened - the network (sweeps' FROM x TO tables) - lessons and next steps - the summary (met,
partly, missed by experiment and by site) - the definitions of every figure (docs/numbers.md).

The figures are taken at one minute, `at`: the last whole minute, or the challenge's end once it has passed. A
challenge still running is reported "so far" (`running`), and every rendering says so on every page."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from challenges.models import Activity, Challenge
from results.choices import Verdict
from results.targets.figures import figures_minute
from results.targets.rates import TargetRates, challenge_targets

from .central import central_section
from .definitions import definitions_section
from .experiments import experiments_section, target_rows
from .lessons import lessons_section, narratives_attach
from .sites import sites_section
from .timeline import network_section, timeline_section

FORMAT = "portal-challenge-report/1"
FINAL = (Verdict.MET, Verdict.PARTLY, Verdict.MISSED)


def report_minute(*, challenge: Challenge, now: datetime | None = None) -> datetime:
    """The minute the report's figures are taken at: the last whole minute (results.targets.figures), not after
    the challenge's end."""
    return figures_minute(min(now or timezone.now(), challenge.end))


def events_window(*, challenge: Challenge, at: datetime) -> dict[str, datetime]:
    """The span the report reads events over (alerts, FTS's optimizer decisions): from the challenge's start up to
    `at`, excluded, the minutes its targets' figures count (results.targets.figures), so a report made mid-challenge
    shows nothing that happened after its "as of", like its figures."""
    return {"start": challenge.start, "end": min(challenge.end, at)}


def report_state(*, challenge: Challenge, at: datetime) -> str:
    if at < challenge.start:
        return "not started"
    return "finished" if at >= challenge.end else "running"


def introduction_section(*, challenge: Challenge, user: Any, rows: list[TargetRates]) -> dict[str, Any]:
    """From the plan: goal, dates, experiments, sites, activities with their targets, and the challenge it is
    compared with (what changed: its activities and target counts beside these)."""
    activities = (
        Activity.objects.filter(challenge=challenge)
        .restrict(user)
        .select_related("experiment", "source")
        .order_by("start", "experiment__name", "name")
    )
    targets = Counter(row.target.activity_id for row in rows)
    sites = {name for row in rows for name in _sites_of(row)}
    intro: dict[str, Any] = {
        "goal": challenge.description,
        "start": challenge.start,
        "end": challenge.end,
        "max_window": challenge.max_window,
        "stable_window": challenge.stable_window,
        "experiments": sorted({a.experiment.name for a in activities}, key=str.lower),
        "sites": sorted(sites, key=str.lower),
        "activities": [
            {
                "name": a.name,
                "experiment": a.experiment.name,
                "mode": a.mode,
                "kind": a.kind,
                "start": a.start,
                "end": a.end,
                "source": a.source.name if a.source else None,
                "targets": targets.get(a.pk, 0),
            }
            for a in activities
        ],
        "targets": len(rows),
        "compared_with": None,
    }
    earlier = challenge.compare_with
    if earlier is not None:
        before = challenge_targets(challenge=earlier).restrict(user)  # type: ignore[attr-defined]
        intro["compared_with"] = {
            "name": earlier.name,
            "slug": earlier.slug,
            "start": earlier.start,
            "end": earlier.end,
            "activities": Activity.objects.filter(challenge=earlier).restrict(user).count(),
            "targets": before.count(),
            "target_rate_total": sum(target.rate for target in before),
            "target_rate_total_now": sum(row.target.rate for row in rows),
        }
    return intro


def _sites_of(row: TargetRates) -> list[str]:
    target = row.target
    if target.is_link:
        return [target.link_from.name, target.link_to.name]  # type: ignore[union-attr]
    return [target.site.name]  # type: ignore[union-attr]


def summary_section(*, rows: list[TargetRates]) -> dict[str, Any]:
    """Targets by verdict, per experiment and per site (a link counts for both its ends): met, partly, missed,
    and the other verdicts of a window still running."""
    by_experiment: dict[str, Counter[str]] = defaultdict(Counter)
    by_site: dict[str, Counter[str]] = defaultdict(Counter)
    total: Counter[str] = Counter()
    for row in rows:
        verdict = row.verdict.value
        total[verdict] += 1
        by_experiment[row.target.activity.experiment.name][verdict] += 1
        for site in set(_sites_of(row)):
            by_site[site][verdict] += 1

    def counts(counter: Counter[str]) -> dict[str, Any]:
        others = {key: value for key, value in counter.items() if key not in FINAL}
        return {"met": counter[Verdict.MET], "partly": counter[Verdict.PARTLY], "missed": counter[Verdict.MISSED],
                "other": others, "targets": sum(counter.values())}  # fmt: skip

    return {
        "total": counts(total),
        "by_experiment": [{"experiment": k, **counts(v)} for k, v in sorted(by_experiment.items())],
        "by_site": [{"site": k, **counts(v)} for k, v in sorted(by_site.items())],
    }


def report_content(*, challenge: Challenge, user: Any, now: datetime | None = None) -> dict[str, Any]:
    """The report's content for `user` (None: everything, as a management command reads it) and its figures' data
    (`figures`: name -> what to plot), times as datetimes (`content_json` makes it JSON)."""
    at = report_minute(challenge=challenge, now=now)
    state = report_state(challenge=challenge, at=at)
    targets = challenge_targets(challenge=challenge)
    if user is not None:
        targets = targets.restrict(user)  # type: ignore[attr-defined]
    rows = target_rows(challenge=challenge, targets=list(targets), at=at)
    figures: dict[str, Any] = {}
    experiments = experiments_section(challenge=challenge, rows=rows, user=user, at=at, figures=figures)
    narratives_attach(challenge=challenge, user=user, experiments=experiments)
    sites = sites_section(challenge=challenge, user=user, at=at)
    window = events_window(challenge=challenge, at=at)
    return {
        "format": FORMAT,
        "challenge": {"name": challenge.name, "slug": challenge.slug},
        "at": at,
        "state": state,
        "so_far": state != "finished",
        "notice": None if state == "finished" else f"Challenge {state}: figures so far, at {at:%Y-%m-%d %H:%M} UTC",
        "introduction": introduction_section(challenge=challenge, user=user, rows=rows),
        "experiments": experiments,
        "events_window": window,
        "central_services": central_section(challenge=challenge, user=user, at=window["end"], rows=rows),
        "sites": sites,
        "timeline": timeline_section(challenge=challenge, user=user, sites=sites, at=window["end"]),
        "network": network_section(challenge=challenge, user=user),
        "lessons": lessons_section(challenge=challenge, user=user, experiments=experiments),
        "summary": summary_section(rows=rows),
        "definitions": definitions_section(),
        "figures": figures,
    }


def content_json(content: dict[str, Any]) -> dict[str, Any]:
    """The content as JSON values (times ISO 8601 UTC, as the API gives them)."""
    import json

    return json.loads(json.dumps(content, cls=DjangoJSONEncoder))  # type: ignore[no-any-return]
