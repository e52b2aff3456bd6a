"""The experiments' perspective of the report: per experiment, its targets' table (the rates API's rows, from
results.targets.figures, never recomputed here), a rate plot per activity (its targets' flows binned as the target
page bins them), its failure anatomy (results.failures) and its own narrative (reports: what experiments tell)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.utils.text import slugify

from challenges.models import Challenge, Target
from results.failures.causes import failures_for_challenge
from results.selectors import default_bin_minutes
from results.targets.figures import figures_row, targets_figures
from results.targets.rates import TargetRates, flows_series
from sites.models import Experiment
from sites.roles import experiment_ids_read

TOP_LINKS = 10  # the failure anatomy's links, most failures first
TOP_CAUSES = 10  # its FTS causes and messages


def target_rows(*, challenge: Challenge, targets: list[Target], at: datetime) -> list[TargetRates]:
    """The figures of these targets at `at`: exactly what the rates API reads (results.targets.figures)."""
    return targets_figures(challenge=challenge, targets=targets, at=at)


def rate_figure(*, activity_name: str, rows: list[TargetRates], at: datetime) -> dict[str, Any]:
    """The data of an activity's rate plot: per target, the mean rate of each bin of its window up to `at` (the
    flow as the rollup holds it), and its target rate as a line."""
    targets = [row.target for row in rows]
    windows = [(row.start, min(row.end, max(at, row.start))) for row in rows]
    start = min(window[0] for window in windows)
    end = max(window[1] for window in windows)
    bin_minutes = default_bin_minutes(duration=max(end - start, timedelta(minutes=1)))
    series = []
    for row, flow in zip(rows, flows_series(targets=targets, windows=windows), strict=True):
        times, rates = [], []
        for index in range(0, len(flow.minutes), bin_minutes):
            chunk = flow.minutes[index : index + bin_minutes]
            times.append(flow.first + timedelta(minutes=index))
            rates.append(sum(chunk) / (60 * len(chunk)))
        series.append(
            {"label": _place(figures_row(row)), "times": times, "rates": rates, "target_rate": row.target.rate}
        )
    return {
        "kind": "rate",
        "title": f"{activity_name}: rate per {bin_minutes} min against its targets",
        "bin_minutes": bin_minutes,
        "start": start,
        "end": end,
        "series": series,
    }


def _place(row: dict[str, Any]) -> str:
    if row["link"]:
        return f"{row['link']['from']} → {row['link']['to']}"
    return f"{row['site']} {row['direction']}"


def failure_anatomy(*, challenge: Challenge, experiment: Experiment, user: Any, at: datetime) -> dict[str, Any]:
    """An experiment's failures in the challenge up to the report's minute `at` (results.failures, the failures
    page's reading): by the portal's category, the links with most failures, FTS's category, scope and phase, the
    commonest messages, per hour."""
    failures = failures_for_challenge(
        challenge=challenge, experiment_ids=experiment_ids_read(user=user, chosen=experiment), until=at
    )
    labels = dict(failures.categories)
    totals: dict[str, int] = defaultdict(int)
    for link in failures.links:
        for category, count in link.counts.items():
            totals[category] += count
    fts: dict[tuple[str, str, str], int] = defaultdict(int)
    for row in failures.fts_rows():
        fts[(row["category"], row["scope"], row["phase"])] += row["failures"]
    messages = sorted(failures.message_rows(), key=lambda row: -row["count"])[:TOP_CAUSES]
    return {
        "failures": sum(totals.values()),
        "computed": failures.computed,
        "by_category": [
            {"category": value, "label": labels.get(value, value), "failures": totals[value]}
            for value, _ in failures.categories
        ],
        "links": failures.as_rows()[:TOP_LINKS],
        "fts_causes": [
            {"category": key[0], "scope": key[1], "phase": key[2], "failures": count}
            for key, count in sorted(fts.items(), key=lambda item: -item[1])[:TOP_CAUSES]
        ],
        "messages": messages,
        "hourly": failures.hourly_rows(),
    }


def failures_figure(*, experiment: str, anatomy: dict[str, Any], start: datetime, end: datetime) -> dict[str, Any]:
    """The data of an experiment's failures-per-hour plot, one stack per category."""
    labels = {row["category"]: row["label"] for row in anatomy["by_category"]}
    stacks: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for row in anatomy["hourly"]:
        stacks[labels.get(row["category"], row["category"])].append((row["hour"], row["failures"]))
    return {
        "kind": "failures",
        "title": f"{experiment}: failed transfers per hour, by category",
        "start": start,
        "end": end,
        "stacks": [
            {"label": label, "hours": [hour for hour, _ in points], "failures": [n for _, n in points]}
            for label, points in stacks.items()
        ],
    }


def experiments_section(
    *, challenge: Challenge, rows: list[TargetRates], user: Any, at: datetime, figures: dict[str, Any]
) -> list[dict[str, Any]]:
    """One entry per experiment with targets the reader may read, by name; its figures' data go into `figures`
    (name -> data) and the entry names them."""
    by_experiment: dict[int, list[TargetRates]] = defaultdict(list)
    for row in rows:
        by_experiment[row.target.activity.experiment_id].append(row)
    experiments = Experiment.objects.filter(pk__in=by_experiment).order_by("name")
    section = []
    for experiment in experiments:
        mine = by_experiment[experiment.pk]
        by_activity: dict[int, list[TargetRates]] = defaultdict(list)
        for row in mine:
            if row.network is None and row.start < at:
                by_activity[row.target.activity_id].append(row)
        names = []
        for activity_rows in by_activity.values():
            activity = activity_rows[0].target.activity
            name = f"rate-{slugify(experiment.name)}-{activity.pk}.png"
            figures[name] = rate_figure(activity_name=activity.name, rows=activity_rows, at=at)
            names.append(name)
        anatomy = failure_anatomy(challenge=challenge, experiment=experiment, user=user, at=at)
        if anatomy["hourly"] and at > challenge.start:
            name = f"failures-{slugify(experiment.name)}.png"
            figures[name] = failures_figure(
                experiment=experiment.name, anatomy=anatomy, start=challenge.start, end=min(challenge.end, at)
            )
            names.append(name)
        section.append(
            {
                "experiment": experiment.name,
                "targets": [figures_row(row) for row in mine],
                "figures": names,
                "failures": anatomy,
                "narrative": None,
            }
        )
    return section
