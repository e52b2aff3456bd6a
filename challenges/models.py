"""Challenges and the shared clock: activities of experiments in time windows, with target rates."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

from sites.models import Experiment, Site
from sites.roles import ActivityExperimentQuerySet, ExperimentRestrictedQuerySet

from .choices import ActivityKind, CopyMode, Direction


class ChallengeQuerySet(ExperimentRestrictedQuerySet):
    """A challenge is readable through its activities: all, or for a DDM service those with an activity of its
    experiment (a challenge without one does not exist for it)."""

    experiment_field = "activities__experiment_id"
    experiment_field_many = True


class Challenge(models.Model):
    """A data challenge: its time span and the windows its rates are measured over."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    start = models.DateTimeField()
    end = models.DateTimeField()
    description = models.TextField(blank=True)
    compare_with = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="an earlier challenge to compare results with",
    )
    max_window = models.PositiveIntegerField(default=3600, help_text="seconds; the max rate's window")
    stable_window = models.PositiveIntegerField(default=18000, help_text="seconds; the stable rate's window")
    alert_thresholds = models.JSONField(
        default=dict,
        blank=True,
        help_text="the live alerts' thresholds where they differ from the defaults (challenges.thresholds): "
        "at_risk_fraction, drop_fraction, ...",
    )

    objects = ChallengeQuerySet.as_manager()

    class Meta:
        ordering = ["-start", "slug"]
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="challenge_end_after_start"),
            models.CheckConstraint(
                condition=Q(max_window__gt=0) & Q(stable_window__gt=0), name="challenge_windows_positive"
            ),
        ]

    def __str__(self) -> str:
        return self.name


# An activity's fields as the plan document, its export, the API and the form give them (besides its name and
# targets): one list, so that a field added to the model is added everywhere.
ACTIVITY_PLAN_FIELDS = (
    "experiment",
    "mode",
    "kind",
    "start",
    "end",
    "source",
    "file_size",
    "file_count",
    "concurrency",
    "copy_mode",
    "auto_run",
    "auto_run_repeat",
    "ddm_activities",
)

# The longest DDM activity name the plan takes (FTS and Rucio activity names are short: "T0 Export", "Data Challenge").
DDM_ACTIVITY_LENGTH = 64
DDM_ACTIVITIES_MAX = 20


class ActivityQuerySet(ExperimentRestrictedQuerySet):
    """Activities restrict themselves to what a user may read (sites.roles): all, or for a DDM service its own
    experiment's. Every page, export, feed and API of the plan reads activities through this."""


class Activity(models.Model):
    """A slot on the shared clock: which experiment runs which mode, of which kind, when, with which test
    parameters."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="activities")
    name = models.CharField(max_length=200)
    experiment = models.ForeignKey(Experiment, on_delete=models.PROTECT, related_name="activities")
    mode = models.CharField(max_length=32, help_text="DT, A-DT or free text")
    kind = models.CharField(max_length=16, choices=ActivityKind.choices)
    start = models.DateTimeField()
    end = models.DateTimeField()
    source = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    file_size = models.PositiveBigIntegerField(null=True, blank=True, help_text="bytes")
    file_count = models.PositiveIntegerField(null=True, blank=True)
    concurrency = models.PositiveIntegerField(null=True, blank=True, help_text="files in flight, e.g. 10, 40, 100")
    copy_mode = models.CharField(max_length=8, choices=CopyMode.choices, blank=True)
    auto_run = models.BooleanField(default=False, help_text="start a run when the window opens")
    auto_run_repeat = models.BooleanField(
        default=False,
        help_text="with auto_run: start the next run whenever the previous one finished, while the window is open (a "
        "steady load); stops after a run that failed or was cancelled",
    )
    ddm_activities = ArrayField(
        models.CharField(max_length=DDM_ACTIVITY_LENGTH),
        default=list,
        blank=True,
        help_text='the FTS / Rucio activity names whose transfers count for it (e.g. "T0 Export"); empty: any',
    )
    injection = models.JSONField(
        default=dict,
        blank=True,
        help_text="Rucio load injection settings where they differ from the defaults (challenges.injection): "
        "interval, fudge, max_injection, expiration_delay, rule_lifetime, big_first, dry_run, comments",
    )

    objects = ActivityQuerySet.as_manager()

    class Meta:
        ordering = ["start", "experiment__name", "name"]
        verbose_name_plural = "activities"
        constraints = [
            models.CheckConstraint(condition=Q(end__gt=F("start")), name="activity_end_after_start"),
            models.UniqueConstraint(fields=["challenge", "name"], name="activity_name_unique_in_challenge"),
        ]

    def __str__(self) -> str:
        return self.name


logger = logging.getLogger(__name__)

# The most TARGET_RATE_MAX may be set to, bytes per second (8 Pb/s, 800 x the default): rate x a century of seconds
# stays far inside a double, so no sum, projection or conversion of a target can overflow. A stored rate beyond it
# (a row from before the bound) is read as this ceiling; see Target.from_db.
TARGET_RATE_CEILING = 1e15


def target_rate_maximum() -> float:
    """The largest target rate the portal takes, bytes per second: settings.TARGET_RATE_MAX (10 Tb/s, 1.25e12 B/s,
    by default), checked at start-up to lie in (0, TARGET_RATE_CEILING] (challenges.apps)."""
    return float(settings.TARGET_RATE_MAX)


def _rate_in_range(value: Any) -> bool:
    return isinstance(value, float | int) and math.isfinite(value) and 0 < value <= TARGET_RATE_CEILING


class Target(models.Model):
    """A target rate of an activity, for a site in one direction or for a link between two sites.

    When it was derived from a nominal rate and factors (nominal 200 MB/s x headroom 1.5 x ...), both are kept
    so that pages can show the derivation.
    """

    activity = models.ForeignKey(Activity, on_delete=models.CASCADE, related_name="targets")
    site = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    direction = models.CharField(max_length=3, choices=Direction.choices, blank=True)
    link_from = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    link_to = models.ForeignKey(Site, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    rate = models.FloatField(help_text="bytes per second")
    nominal_rate = models.FloatField(null=True, blank=True, help_text="bytes per second")
    factors = models.JSONField(default=dict, blank=True, help_text='e.g. {"headroom": 1.5, "efficiency": 2}')

    objects = ActivityExperimentQuerySet.as_manager()

    class Meta:
        ordering = ["activity", "site__name", "direction", "link_from__name", "link_to__name"]
        constraints = [
            models.CheckConstraint(condition=Q(rate__gt=0), name="target_rate_positive"),
            models.CheckConstraint(
                condition=(
                    Q(site__isnull=False) & ~Q(direction="") & Q(link_from__isnull=True) & Q(link_to__isnull=True)
                )
                | (Q(site__isnull=True) & Q(direction="") & Q(link_from__isnull=False) & Q(link_to__isnull=False)),
                name="target_site_or_link",
            ),
            models.UniqueConstraint(
                fields=["activity", "site", "direction"],
                condition=Q(site__isnull=False),
                name="target_unique_site_direction",
            ),
            models.UniqueConstraint(
                fields=["activity", "link_from", "link_to"], condition=Q(site__isnull=True), name="target_unique_link"
            ),
        ]

    # What a row read from the database held beyond TARGET_RATE_CEILING, by field ({"rate": inf}); empty for a
    # row the rules wrote. See from_db.
    stored_out_of_range: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.activity}: {self.place} {self.rate / 1e9:.3g} GB/s"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stored_out_of_range = {}

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any) -> Target:
        """A row as stored, except a rate, nominal rate or factor no rule would take today (Infinity, NaN, 1.7e308,
        written before the rules bounded them, as a restored old database holds): every reader's arithmetic (the now
        board's projection, Rucio's Mbps, the results' ratios) would overflow to a value JSON cannot carry. The rate
        is read as TARGET_RATE_CEILING, a nominal rate and factors that derive no finite rate as none; the stored
        values stay in `stored_out_of_range` (the injection plans name them as a problem) and in a warning."""
        target = super().from_db(db, field_names, values)
        fields = target.__dict__  # a deferred field is absent: nothing to check
        if "rate" in fields and not _rate_in_range(fields["rate"]):
            target.stored_out_of_range["rate"] = fields["rate"]
            target.rate = TARGET_RATE_CEILING
        if "nominal_rate" in fields and "factors" in fields and fields["nominal_rate"] is not None:
            derived = _product_or_none(fields["nominal_rate"], fields["factors"])
            if not _rate_in_range(fields["nominal_rate"]) or derived is None or not _rate_in_range(derived):
                target.stored_out_of_range |= {"nominal_rate": fields["nominal_rate"], "factors": fields["factors"]}
                target.nominal_rate, target.factors = None, {}
        if target.stored_out_of_range:
            logger.warning(
                "target %s holds %r beyond what a target may be (stored before the rules bounded it): read as rate "
                "%r without a derivation; import the plan again with a rate of at most TARGET_RATE_MAX",
                target.pk,
                target.stored_out_of_range,
                target.rate,
            )
        return target

    @property
    def is_link(self) -> bool:
        return self.site_id is None

    @property
    def place(self) -> str:
        """ "CNAF in", or "CERN -> BNL" for a link."""
        if self.is_link:
            return f"{self.link_from} -> {self.link_to}"
        return f"{self.site} {self.direction}"

    @property
    def derived_rate(self) -> float | None:
        """nominal x the product of the factors, when a nominal rate was given."""
        if self.nominal_rate is None:
            return None
        return self.nominal_rate * math.prod(float(value) for value in self.factors.values())


def _product_or_none(nominal_rate: float, factors: Any) -> float | None:
    """nominal x the factors as stored, or None when the factors are not named numbers or the product overflows."""
    if not isinstance(factors, dict):
        return None
    try:
        product = nominal_rate * math.prod(float(value) for value in factors.values())
    except (TypeError, ValueError, OverflowError):
        return None
    return product if math.isfinite(product) else None
