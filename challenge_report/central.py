"""Central services in the report: what FTS's optimizer did on each link (its decisions over the challenge, what
limited the link by live.links' reading, `link_limited_by`, and the latest decision as the link panel shows it),
failures by FTS's category, scope and phase over every experiment the reader may read (up to the report's minute),
and the Rucio injection plans the plan gives (challenges.injection)."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Q

from challenges.injection import injection_plan_dict, injection_plans, injection_problem_dict
from challenges.models import Challenge, Target
from live.links import challenge_links, link_limited_by
from results.failures.causes import failures_for_challenge
from results.models import OptimizerDecision
from results.targets.rates import TargetRates
from sites.roles import experiment_ids_read, experiments_visible

TOP_FTS_CAUSES = 20


def _decisions(*, challenge: Challenge, user: Any, at: datetime) -> dict[tuple[str, str], list[OptimizerDecision]]:
    """FTS's optimizer decisions of the report's window [challenge start, `at`) (the minutes its targets' figures
    count: content.events_window), per link (names), of no experiment or of one the reader may read (as the link
    panel reads them)."""
    decisions = OptimizerDecision.objects.filter(at__gte=challenge.start, at__lt=min(challenge.end, at)).filter(
        Q(experiment__isnull=True) | Q(experiment__in=experiments_visible(user=user))
    )
    links: dict[tuple[str, str], list[OptimizerDecision]] = defaultdict(list)
    for decision in decisions.select_related("source_site", "destination_site").order_by("at", "id").iterator():
        source = decision.source_site.name if decision.source_site else decision.source_se
        destination = decision.destination_site.name if decision.destination_site else decision.dest_se
        links[(source, destination)].append(decision)
    return links


def _planned(rows: list[TargetRates]) -> dict[tuple[str, str], list[Target]]:
    """The targets whose flow is each link (names): link targets, and site targets into a site from their
    activity's source."""
    links: dict[tuple[str, str], list[Target]] = defaultdict(list)
    for row in rows:
        target = row.target
        if target.is_link:
            links[(target.link_from.name, target.link_to.name)].append(target)  # type: ignore[union-attr]
        elif target.direction == "in" and target.activity.source is not None:
            links[(target.activity.source.name, target.site.name)].append(target)  # type: ignore[union-attr]
    return links


def _target_at(targets: list[Target], moment: datetime) -> float | None:
    """The link's target rate when FTS decided: its targets whose activities ran then, added up (None: none ran)."""
    running = [target.rate for target in targets if target.activity.start <= moment < target.activity.end]
    return sum(running) if running else None


def optimizer_links(*, challenge: Challenge, user: Any, at: datetime, rows: list[TargetRates]) -> list[dict[str, Any]]:
    """Per link: the panel's figures at `at` (average so far, its last hour) and over the report's window the
    optimizer's decisions: how many, the fewest and most actives it allowed, how often each limit was seen (each
    decision read against the link's target at its time), and what limited it at the end (the latest decision of
    the window read as the panel reads its latest, so no decision after `at` shows)."""
    panel = {
        (link["source"], link["destination"]): link
        for link in challenge_links(challenge=challenge, user=user, at=at)["links"]
    }
    decided = _decisions(challenge=challenge, user=user, at=at)
    planned = _planned(rows)
    found: list[dict[str, Any]] = []
    for key in sorted({*panel, *decided}, key=lambda pair: (pair[0].lower(), pair[1].lower())):
        link = panel.get(key, {})
        decisions = decided.get(key, [])
        limits = Counter(
            link_limited_by(
                decision=decision,
                target_rate=_target_at(planned.get(key, []), decision.at),
                rate=decision.throughput or 0.0,
            )
            for decision in decisions
        )
        limits.pop(None, None)
        latest = decisions[-1] if decisions else None
        found.append(
            {
                "source": key[0],
                "destination": key[1],
                "target_rate": max((target.rate for target in planned.get(key, [])), default=None),
                "average_rate": link.get("average_rate"),
                "limited_by": link_limited_by(
                    decision=latest, target_rate=link.get("target_rate"), rate=link.get("last_hour_rate") or 0.0
                ),
                "decisions": len(decisions),
                "active_min": min((d.active for d in decisions), default=None),
                "active_max": max((d.active for d in decisions), default=None),
                "limits_seen": dict(sorted(limits.items())),
                "latest": None
                if latest is None
                else {"at": latest.at, "active": latest.active, "throughput": latest.throughput,
                      "success": latest.success, "rationale": latest.rationale},
            }
        )  # fmt: skip
    return found


def fts_failures(*, challenge: Challenge, user: Any, at: datetime) -> list[dict[str, Any]]:
    """Failures by FTS's category, scope and phase over every experiment the reader may read, of the report's
    window (those that ended before `at`), most first."""
    failures = failures_for_challenge(challenge=challenge, experiment_ids=experiment_ids_read(user=user), until=at)
    counts: Counter[tuple[str, str, str]] = Counter()
    for row in failures.fts_rows():
        counts[(row["category"], row["scope"], row["phase"])] += row["failures"]
    return [
        {"category": category, "scope": scope, "phase": phase, "failures": count}
        for (category, scope, phase), count in counts.most_common(TOP_FTS_CAUSES)
    ]


def central_section(*, challenge: Challenge, user: Any, at: datetime, rows: list[TargetRates]) -> dict[str, Any]:
    plans, problems = injection_plans(challenge=challenge, user=user)
    return {
        "links": optimizer_links(challenge=challenge, user=user, at=at, rows=rows),
        "fts_failures": fts_failures(challenge=challenge, user=user, at=at),
        "injection_plans": [injection_plan_dict(plan) for plan in plans],
        "injection_problems": [injection_problem_dict(problem) for problem in problems],
    }
