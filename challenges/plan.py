"""The plan document's writes and reads: importing a challenge with its activities and targets (all or nothing)
and exporting it back in the same shape."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Prefetch

from sites.services import RowCounts

from . import validation
from .documents import ActivityEntry, ParsedPlan, TargetEntry, plan_document_validate
from .models import ACTIVITY_PLAN_FIELDS, Activity, Challenge, Target
from .signals import plan_changed

CHALLENGE_FIELDS = (
    "name",
    "start",
    "end",
    "max_window",
    "stable_window",
    "description",
    "compare_with",
    "alert_thresholds",
)
ACTIVITY_FIELDS = (*ACTIVITY_PLAN_FIELDS, "injection")
TARGET_FIELDS = ("rate", "nominal_rate", "factors")
ACTIVITY_OPTIONAL_FIELDS = ("file_size", "file_count", "concurrency")

PLAN_IMPORT_LOCK = 0x504C414E  # an arbitrary application-wide advisory lock key ("PLAN")


@dataclass
class PlanImportSummary:
    """Counts of created, updated and deleted rows per kind, from one import. `updated` counts rows that were
    there and were written again."""

    challenge: RowCounts = field(default_factory=RowCounts)
    activities: RowCounts = field(default_factory=RowCounts)
    targets: RowCounts = field(default_factory=RowCounts)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return asdict(self)

    def __str__(self) -> str:
        return "; ".join(
            f"{kind}: {counts['created']} created, {counts['updated']} updated, {counts['deleted']} deleted"
            for kind, counts in self.as_dict().items()
        )


@transaction.atomic
def plan_import(*, document: dict[str, Any]) -> PlanImportSummary:
    """Upsert a plan document, all or nothing.

    Validates the whole document first and raises `PlanDocumentError` listing every problem (nothing is stored).
    Then the challenge is upserted by slug; its activities are upserted by name and those the document leaves
    out are deleted (with their targets); each activity's targets become exactly the document's (a target with
    the same site and direction, or the same link, keeps its row). The number of queries does not grow with the
    size of the document.
    """
    # One import at a time: two imports of a new slug would both validate and then collide on the slug.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [PLAN_IMPORT_LOCK])
    parsed = plan_document_validate(document=document)
    summary = PlanImportSummary()
    before = list(
        Activity.objects.filter(challenge__slug=parsed.slug).only("pk", "experiment_id", "start", "end").order_by()
    )
    challenge = _challenge_upsert(parsed=parsed, counts=summary.challenge)
    activities = _activities_upsert(
        challenge=challenge, entries=parsed.activities, counts=summary.activities, target_counts=summary.targets
    )
    _targets_upsert(entries=parsed.activities, activities=activities, counts=summary.targets)
    # Bulk writes send no save signals: tell the apps above (results re-attributes the records these may claim).
    plan_changed.send(sender=Activity, activities=[*before, *activities.values()])
    return summary


def plan_export(*, challenge: Challenge, user: Any = None) -> dict[str, Any]:
    """A challenge as a plan document, the shape `plan_import` takes, in a constant number of queries; with a user,
    only the activities they may read (a DDM service: its experiment's).

    Times are UTC as `YYYY-MM-DDTHH:MM:SSZ`. The windows and `auto_run` are always given; other optional values
    are left out when empty. Activities come in clock order (start, experiment, name), targets by site and
    direction, then links.
    """
    targets = Target.objects.select_related("site", "link_from", "link_to").order_by(
        "site__name", "direction", "link_from__name", "link_to__name", "pk"
    )
    activities = Activity.objects.filter(challenge=challenge)
    activities = (
        (activities if user is None else activities.restrict(user))
        .select_related("experiment", "source")
        .prefetch_related(Prefetch("targets", queryset=targets))
        .order_by("start", "experiment__name", "name", "pk")
    )
    document: dict[str, Any] = {
        "name": challenge.name,
        "slug": challenge.slug,
        "start": _time_export(challenge.start),
        "end": _time_export(challenge.end),
        "max_window": challenge.max_window,
        "stable_window": challenge.stable_window,
    }
    if challenge.description:
        document["description"] = challenge.description
    if challenge.alert_thresholds:
        document["alerts"] = dict(challenge.alert_thresholds)
    if challenge.compare_with_id is not None:
        document["compare_with"] = (
            Challenge.objects.filter(pk=challenge.compare_with_id).values_list("slug", flat=True).first()
        )
    document["activities"] = [_activity_export(activity) for activity in activities]
    return document


def _time_export(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _activity_export(activity: Activity) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": activity.name,
        "experiment": activity.experiment.name,
        "mode": activity.mode,
        "kind": activity.kind,
        "start": _time_export(activity.start),
        "end": _time_export(activity.end),
    }
    if activity.source is not None:
        document["source"] = activity.source.name
    for name in ACTIVITY_OPTIONAL_FIELDS:
        if getattr(activity, name) is not None:
            document[name] = getattr(activity, name)
    if activity.copy_mode:
        document["copy_mode"] = activity.copy_mode
    document["auto_run"] = activity.auto_run
    if activity.auto_run_repeat:
        document["auto_run_repeat"] = True
    if activity.ddm_activities:
        document["ddm_activities"] = list(activity.ddm_activities)
    if activity.injection:
        document["injection"] = dict(activity.injection)
    document["targets"] = [_target_export(target) for target in activity.targets.all()]
    return document


def _target_export(target: Target) -> dict[str, Any]:
    document: dict[str, Any]
    if target.is_link:
        document = {"link": {"from": target.link_from.name, "to": target.link_to.name}}  # type: ignore[union-attr]
    else:
        document = {"site": target.site.name, "direction": target.direction}  # type: ignore[union-attr]
    document["rate"] = target.rate
    if target.nominal_rate is not None:
        document["nominal_rate"] = target.nominal_rate
    if target.factors:
        document["factors"] = dict(target.factors)
    return document


def _challenge_upsert(*, parsed: ParsedPlan, counts: RowCounts) -> Challenge:
    challenge = Challenge.objects.filter(slug=parsed.slug).first() or Challenge(slug=parsed.slug)
    if challenge.pk is None:
        counts.created = 1
    else:
        counts.updated = 1
    for name in CHALLENGE_FIELDS:
        setattr(challenge, name, getattr(parsed, name))
    challenge.save()
    return challenge


def _activities_upsert(
    *, challenge: Challenge, entries: list[ActivityEntry], counts: RowCounts, target_counts: RowCounts
) -> dict[str, Activity]:
    """Upsert the activities by name and delete those the document leaves out; return them by name."""
    existing = {activity.name: activity for activity in Activity.objects.filter(challenge=challenge)}
    created: list[Activity] = []
    updated: list[Activity] = []
    for entry in entries:
        activity = existing.pop(entry.name, None) or Activity(challenge=challenge, name=entry.name)
        for name in ACTIVITY_FIELDS:
            setattr(activity, name, getattr(entry, name))
        (updated if activity.pk else created).append(activity)
    # What is left in `existing` is absent from the document; its targets go with it.
    _, deleted = Activity.objects.filter(pk__in=[activity.pk for activity in existing.values()]).delete()
    counts.deleted = deleted.get(Activity._meta.label, 0)
    target_counts.deleted += deleted.get(Target._meta.label, 0)
    Activity.objects.bulk_update(updated, ACTIVITY_FIELDS)
    Activity.objects.bulk_create(created)
    counts.created, counts.updated = len(created), len(updated)
    return {activity.name: activity for activity in (*updated, *created)}


def _target_key(target: Target | TargetEntry) -> tuple[Any, ...]:
    return validation.target_key(
        site=target.site, direction=target.direction, link_from=target.link_from, link_to=target.link_to
    )


def _targets_upsert(*, entries: list[ActivityEntry], activities: dict[str, Activity], counts: RowCounts) -> None:
    """Make each activity's targets exactly the document's; a target with the same place keeps its row."""
    existing = {
        (target.activity_id, _target_key(target)): target
        for target in Target.objects.filter(activity__in=activities.values()).select_related(
            "site", "link_from", "link_to"
        )
    }
    created: list[Target] = []
    updated: list[Target] = []
    for entry in entries:
        activity = activities[entry.name]
        for target_entry in entry.targets:
            target = existing.pop((activity.pk, _target_key(target_entry)), None)
            if target is None:
                target = Target(
                    activity=activity,
                    site=target_entry.site,
                    direction=target_entry.direction,
                    link_from=target_entry.link_from,
                    link_to=target_entry.link_to,
                )
            for name in TARGET_FIELDS:
                setattr(target, name, getattr(target_entry, name))
            (updated if target.pk else created).append(target)
    Target.objects.filter(pk__in=[target.pk for target in existing.values()]).delete()
    counts.deleted += len(existing)
    Target.objects.bulk_update(updated, TARGET_FIELDS)
    Target.objects.bulk_create(created)
    counts.created, counts.updated = len(created), len(updated)
