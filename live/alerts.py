"""Alerts of a running challenge (writes): the conditions found at a minute, and the alerts they open, keep open and
resolve. Evaluated every minute by beat (`live.alerts_evaluate`) and by `manage.py alerts_evaluate`.

Conditions (thresholds per challenge, live.thresholds):
- target_at_risk: a running target whose verdict is "at risk" or "will miss" (results.targets.figures; never a
  network target, whose verdict comes from its iperf3 runs);
- throughput_drop: a link, or a site target, whose last 15 minutes' rate is below drop_fraction of its mean over
  the hour before them (the perfSONAR / AAAS rule: |change| >= 50 %);
- site_multi_drop: three or more links of one site dropping at once: one alert for the site instead of one per link
  ("bandwidth decreased from/to multiple sites");
- no_traffic: a running target that had traffic and has had no transfer end for 15 minutes;
- failure_spike: a link with at least 20 attempts in the last 15 minutes and a failure ratio of 50 % or more;
- source_silent: a DDM source that sent records in the past hour and none for 15 minutes while others flow;
- agent_silent: an enrolled agent of one of the challenge's sites that has not called the portal for
  AGENT_SILENT_MINUTES (live.agents).
One open alert per kind and subject; it resolves once its condition has been false for resolve_after_minutes, and
every opening and resolution is delivered to the subscriptions that match it (live.delivery).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q, Sum

from challenges.models import Challenge, Target
from challenges.thresholds import Thresholds, challenge_thresholds
from common.locks import advisory_lock
from common.units import percent_text, rate_text, size_text
from results.choices import VERDICTS_AT_RISK
from results.models import RateRollup
from sites.models import Site

from .agents import AGENT_SILENT_MINUTES, agents_now, challenge_site_ids_all
from .choices import AlertKind, AlertState
from .models import Alert
from .now import TargetNow, board_minute, sources_now, targets_now


@dataclass
class Condition:
    """A condition found true at a minute: what an alert of its kind and subject says."""

    kind: str
    subject: str
    message: str
    value: float | None = None
    threshold: float | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # target, activity, experiment, site, link ends


@dataclass
class EvaluateSummary:
    opened: list[Alert] = field(default_factory=list)
    resolved: list[Alert] = field(default_factory=list)
    kept: int = 0


def _place(target: Target) -> str:
    if target.is_link:
        return f"{target.link_from.name} -> {target.link_to.name}"  # type: ignore[union-attr]
    return f"{target.site.name} {target.direction}"  # type: ignore[union-attr]


def _target_fields(target: Target) -> dict[str, Any]:
    return {
        "target": target,
        "activity": target.activity,
        "experiment": target.activity.experiment,
        "site": target.site,
        "link_source": target.link_from,
        "link_destination": target.link_to,
    }


def _target_conditions(rows: list[TargetNow], thresholds: Thresholds, at: datetime) -> list[Condition]:
    """target_at_risk, no_traffic and (for site targets: a link's are the link's own) throughput_drop."""
    found = []
    for row in rows:
        target = row.target
        name = f"{target.activity.name} ({target.activity.experiment.name}, {_place(target)})"
        if row.figures.verdict in VERDICTS_AT_RISK:
            found.append(
                Condition(
                    AlertKind.TARGET_AT_RISK,
                    f"target:{target.pk}",
                    f"{name}: {row.verdict}: the window's projected average is "
                    f"{rate_text(row.projected_average_rate)} against a target of {rate_text(target.rate)}; the rest "
                    f"of the window needs {rate_text(row.required_rate)}",
                    row.projected_average_rate,
                    target.rate,
                    _target_fields(target),
                )
            )
        quiet = thresholds.no_traffic_minutes
        if row.minutes and row.volume > 0 and not any(row.minutes[-quiet:]):
            moved = [index for index, value in enumerate(row.minutes) if value > 0]
            minutes = len(row.minutes) - (moved[-1] + 1) if moved else len(row.minutes)
            found.append(
                Condition(
                    AlertKind.NO_TRAFFIC,
                    f"target:{target.pk}",
                    f"{name}: nothing moved for the last {minutes} minutes (as of {at:%H:%M} UTC; it had moved "
                    f"{size_text(row.volume)})",
                    minutes * 60.0,
                    quiet * 60.0,
                    _target_fields(target),
                )
            )
        if not target.is_link and row.minutes:
            recent = row.recent_rate(thresholds.drop_minutes)
            before = row.recent_rate(thresholds.drop_baseline_minutes, skip=thresholds.drop_minutes)
            # A flow that stopped is no_traffic's (above), not a drop as well.
            if before > 0 and 0 < recent < thresholds.drop_fraction * before:
                found.append(
                    Condition(
                        AlertKind.THROUGHPUT_DROP,
                        f"target:{target.pk}",
                        f"{name}: throughput dropped to {rate_text(recent)} over the last {thresholds.drop_minutes} "
                        f"minutes from {rate_text(before)} over the hour before",
                        recent,
                        thresholds.drop_fraction * before,
                        _target_fields(target),
                    )
                )
    return found


def _covers(target: Target, source: int, destination: int) -> bool:
    """Whether the target's flow runs over the link."""
    if target.is_link:
        return (target.link_from_id, target.link_to_id) == (source, destination)
    return target.site_id == (destination if target.direction == "in" else source)


def _link_conditions(
    challenge: Challenge, at: datetime, thresholds: Thresholds, stopped: list[Target]
) -> list[Condition]:
    """throughput_drop and failure_spike per link of the challenge's experiments (from the minute rollup), and
    site_multi_drop where several links of one site drop at once. A link that stopped under a target whose
    no_traffic alert says so (`stopped`) is not a drop as well."""
    recent_from = at - timedelta(minutes=thresholds.drop_minutes)
    baseline_from = recent_from - timedelta(minutes=thresholds.drop_baseline_minutes)
    failures_from = at - timedelta(minutes=thresholds.failure_minutes)
    experiments = challenge.activities.values_list("experiment_id", flat=True)  # type: ignore[attr-defined]
    stats = (
        RateRollup.objects.filter(
            experiment_id__in=experiments,
            minute__gte=min(baseline_from, failures_from),
            minute__lt=at,
            source_site_id__isnull=False,
            destination_site_id__isnull=False,
        )
        .values("source_site_id", "destination_site_id")
        .annotate(
            recent=Sum("bytes", filter=Q(minute__gte=recent_from)),
            baseline=Sum("bytes", filter=Q(minute__gte=baseline_from, minute__lt=recent_from)),
            ok=Sum("files_ok", filter=Q(minute__gte=failures_from)),
            failed=Sum("files_failed", filter=Q(minute__gte=failures_from)),
        )
    )
    sites = Site.objects.in_bulk()
    drops: dict[tuple[int, int], Condition] = {}
    found: list[Condition] = []
    for row in stats:
        source, destination = sites[row["source_site_id"]], sites[row["destination_site_id"]]
        link = {"link_source": source, "link_destination": destination}
        subject = f"link:{source.pk}-{destination.pk}"
        recent = float(row["recent"] or 0) / (thresholds.drop_minutes * 60)
        before = float(row["baseline"] or 0) / (thresholds.drop_baseline_minutes * 60)
        silent = recent == 0 and any(_covers(target, source.pk, destination.pk) for target in stopped)
        if before > 0 and recent < thresholds.drop_fraction * before and not silent:
            drops[(source.pk, destination.pk)] = Condition(
                AlertKind.THROUGHPUT_DROP,
                subject,
                f"{source.name} -> {destination.name}: throughput dropped to {rate_text(recent)} over the last "
                f"{thresholds.drop_minutes} minutes from {rate_text(before)} over the hour before",
                recent,
                thresholds.drop_fraction * before,
                link,
            )
        ok, failed = int(row["ok"] or 0), int(row["failed"] or 0)
        if ok + failed >= thresholds.failure_min_attempts and failed / (ok + failed) >= thresholds.failure_ratio:
            found.append(
                Condition(
                    AlertKind.FAILURE_SPIKE,
                    subject,
                    f"{source.name} -> {destination.name}: {failed} of {ok + failed} transfers failed in the last "
                    f"{thresholds.failure_minutes} minutes ({percent_text(failed / (ok + failed))})",
                    failed / (ok + failed),
                    thresholds.failure_ratio,
                    link,
                )
            )
    return found + _drops_by_site(drops, sites, thresholds)


def _drops_by_site(
    drops: dict[tuple[int, int], Condition], sites: dict[int, Site], thresholds: Thresholds
) -> list[Condition]:
    """One site_multi_drop for a site with several dropping links (which then make no alert of their own)."""
    by_site: dict[int, set[tuple[int, int]]] = {}
    for link in drops:
        for end in link:
            by_site.setdefault(end, set()).add(link)
    found, covered = [], set()
    for site_id, site_links in sorted(by_site.items(), key=lambda item: -len(item[1])):
        links = site_links - covered
        if len(links) < thresholds.site_multi_drop_links:
            continue
        covered |= links
        peers = sorted(sites[a if b == site_id else b].name for a, b in links)
        found.append(
            Condition(
                AlertKind.SITE_MULTI_DROP,
                f"site:{site_id}",
                f"{sites[site_id].name}: bandwidth decreased on {len(links)} links at once (with {', '.join(peers)})",
                float(len(links)),
                float(thresholds.site_multi_drop_links),
                {"site": sites[site_id]},
            )
        )
    return found + [condition for link, condition in drops.items() if link not in covered]


def _source_conditions(challenge: Challenge, at: datetime, thresholds: Thresholds) -> list[Condition]:
    """source_silent: a DDM source that sent in the past hour, silent for a while, while another source flows."""
    sources = sources_now(challenge=challenge, at=at)
    quiet = thresholds.source_silent_minutes * 60

    def flowing(source: dict[str, Any]) -> bool:
        return source["age_seconds"] is not None and source["age_seconds"] < quiet

    found = []
    for source in sources:
        if source["source"] == "runs" or not source["records_last_hour"] or flowing(source):
            continue
        if any(flowing(other) for other in sources if other is not source):
            found.append(
                Condition(
                    AlertKind.SOURCE_SILENT,
                    f"source:{source['source']}",
                    f"{source['source']}: no record for {int(source['age_seconds'] // 60)} minutes while other "
                    f"sources send ({source['records_last_hour']} records in the last hour)",
                    source["age_seconds"],
                    float(quiet),
                )
            )
    return found


def _agent_conditions(challenge: Challenge, at: datetime) -> list[Condition]:
    """agent_silent: a live agent of the challenge's sites silent for AGENT_SILENT_MINUTES or more."""
    found = []
    for agent in agents_now(site_ids=challenge_site_ids_all(challenge=challenge), at=at):
        if not agent["silent"]:
            continue
        heard = f"last heard at {agent['last_seen']:%Y-%m-%d %H:%M} UTC" if agent["last_seen"] else "never heard"
        found.append(
            Condition(
                AlertKind.AGENT_SILENT,
                f"agent:{agent['site']}/{agent['name']}",
                f"the agent of {agent['site']} ({agent['name']}) has not reported for "
                f"{int(agent['age_seconds'] // 60)} minutes ({heard}): its site's runs wait",
                agent["age_seconds"],
                float(AGENT_SILENT_MINUTES * 60),
                {"site": Site.objects.get(pk=agent["site_id"])},
            )
        )
    return found


def conditions_find(*, challenge: Challenge, at: datetime, thresholds: Thresholds) -> list[Condition]:
    """Every condition of the challenge that holds at `at` (a minute)."""
    targets = list(
        Target.objects.filter(activity__challenge=challenge).select_related(
            "activity__experiment", "activity__challenge", "site", "link_from", "link_to"
        )
    )
    running = [row for row in targets_now(challenge=challenge, targets=targets, at=at) if row.minutes]
    found = _target_conditions(running, thresholds, at)
    stopped = [condition.fields["target"] for condition in found if condition.kind == AlertKind.NO_TRAFFIC]
    found += _link_conditions(challenge, at, thresholds, stopped) + _source_conditions(challenge, at, thresholds)
    return found + _agent_conditions(challenge, at)


def alerts_evaluate(*, challenge: Challenge, at: datetime | None = None) -> EvaluateSummary:
    """Open an alert for each new condition, keep those that still hold, resolve those false for long enough; each
    opening and resolution goes to the matching subscriptions once the transaction commits. One evaluation of a
    challenge at a time (an advisory lock): beat's and a command's never race."""
    at = board_minute(at)
    thresholds = challenge_thresholds(challenge=challenge)
    summary = EvaluateSummary()
    with advisory_lock(f"alerts {challenge.pk}"), transaction.atomic():
        conditions = conditions_find(challenge=challenge, at=at, thresholds=thresholds) if at < challenge.end else []
        open_alerts = {
            (alert.kind, alert.subject): alert
            for alert in Alert.objects.select_for_update().filter(challenge=challenge, state=AlertState.OPEN)
        }
        for condition in conditions:
            alert = open_alerts.pop((condition.kind, condition.subject), None)
            if alert is not None:
                alert.last_seen_at, alert.value, alert.message = at, condition.value, condition.message
                alert.save(update_fields=["last_seen_at", "value", "message"])
                summary.kept += 1
                continue
            alert = Alert.objects.create(
                challenge=challenge,
                kind=condition.kind,
                subject=condition.subject,
                message=condition.message,
                value=condition.value,
                threshold=condition.threshold,
                started_at=at,
                last_seen_at=at,
                **condition.fields,
            )
            summary.opened.append(alert)
        resolve_by = at - timedelta(minutes=thresholds.resolve_after_minutes)
        for alert in open_alerts.values():
            if alert.last_seen_at <= resolve_by or at >= challenge.end:
                alert.state, alert.resolved_at = AlertState.RESOLVED, at
                alert.save(update_fields=["state", "resolved_at"])
                summary.resolved.append(alert)
            else:
                summary.kept += 1
        for alert in summary.opened + summary.resolved:
            _deliver(alert)
    return summary


def _deliver(alert: Alert) -> None:
    from .delivery import alert_deliveries_create

    alert_deliveries_create(alert=alert)


def challenges_to_evaluate(*, now: datetime | None = None) -> Any:
    """The challenges beat evaluates: those running, and those ended within the hour (their open alerts resolve)."""
    moment = board_minute(now)
    return Challenge.objects.filter(start__lte=moment, end__gt=moment - timedelta(hours=1)).order_by("start", "pk")
