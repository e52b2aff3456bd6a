"""Alerts of a running challenge, who subscribed to them, and every delivery made."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from sites.roles import ExperimentSiteRestrictedQuerySet, Grant

from .choices import AlertKind, AlertState, DeliveryFormat, DeliveryStatus


class AlertQuerySet(ExperimentSiteRestrictedQuerySet):
    """Alerts as the access policy restricts them: `restrict(user, "view")` by their experiment, and
    `restrict(user, "acknowledge" | "silence")` by their experiment and their site or either end of their link."""

    site_fields = ("site_id", "link_source_id", "link_destination_id")


class Alert(models.Model):
    """One condition of one subject (a target, a link, a site, a DDM source) of a challenge, open while it holds and
    resolved once it has been false for a while. At most one open alert per kind and subject."""

    challenge = models.ForeignKey("challenges.Challenge", on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=24, choices=AlertKind.choices)
    subject = models.CharField(
        max_length=200, help_text='what it is about, as a key: "target:12", "link:3-5", "site:3", "source:fts"'
    )
    state = models.CharField(max_length=10, choices=AlertState.choices, default=AlertState.OPEN)
    target = models.ForeignKey("challenges.Target", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    activity = models.ForeignKey(
        "challenges.Activity", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    experiment = models.ForeignKey(
        "sites.Experiment", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    site = models.ForeignKey("sites.Site", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    link_source = models.ForeignKey("sites.Site", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    link_destination = models.ForeignKey(
        "sites.Site", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    value = models.FloatField(null=True, blank=True, help_text="what was measured (bytes/s, a ratio, seconds)")
    threshold = models.FloatField(null=True, blank=True, help_text="what it was held against, in the same unit")
    message = models.TextField()
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField(help_text="the last evaluation that found the condition true")
    resolved_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    silenced_until = models.DateTimeField(null=True, blank=True, help_text="no deliveries before this time")
    silenced_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    # Who may read an alert: the access policy's rule on its experiment (an alert of no experiment, such as a site's
    # drop over all experiments, is read by every role but a DDM service's); who may act on it: sites.roles too.
    objects = AlertQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "kind", "subject"], condition=Q(state="open"), name="alert_one_open_per_subject"
            )
        ]
        indexes = [models.Index(fields=["challenge", "state"], name="alert_challenge_state")]

    def __str__(self) -> str:
        return f"{self.kind} {self.subject} ({self.state})"


class AlertSubscription(models.Model):
    """Where alerts go: a webhook (JSON, or the Slack/Mattermost text body) or an e-mail address, for a challenge (or
    all), some experiments, sites and kinds (empty: all)."""

    name = models.CharField(max_length=200)
    url = models.URLField(max_length=2000, blank=True)
    email = models.EmailField(blank=True)
    format = models.CharField(max_length=8, choices=DeliveryFormat.choices, default=DeliveryFormat.JSON)
    challenge = models.ForeignKey(
        "challenges.Challenge", on_delete=models.CASCADE, null=True, blank=True, related_name="alert_subscriptions"
    )
    experiments = models.ManyToManyField("sites.Experiment", blank=True, related_name="+")
    sites = models.ManyToManyField("sites.Site", blank=True, related_name="+")
    kinds = ArrayField(models.CharField(max_length=24, choices=AlertKind.choices), default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    active = models.BooleanField(default=True)
    # The scope of the token it was made with, kept for as long as it lives: its deliveries go only to what its
    # creator may read within that scope (sites.roles.actor_scoped). Empty role: made with all the creator's roles.
    scope_role = models.CharField(
        max_length=16, blank=True, help_text="the role of the token it was made with; empty: all its creator's roles"
    )
    scope_site = models.ForeignKey("sites.Site", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    scope_experiment = models.ForeignKey(
        "sites.Experiment", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(url="") & ~Q(email="")) | (~Q(url="") & Q(email="")), name="subscription_url_or_email"
            )
        ]

    def __str__(self) -> str:
        return self.name

    def scope(self) -> Grant | None:
        """The token scope it was made with, or None when it was made with all its creator's roles."""
        if not self.scope_role:
            return None
        return Grant(self.scope_role, self.scope_site_id, self.scope_experiment_id)


class AlertDelivery(models.Model):
    """One alert's state change sent to one subscription: once per alert, subscription and state."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    subscription = models.ForeignKey(AlertSubscription, on_delete=models.CASCADE, related_name="deliveries")
    alert_state = models.CharField(max_length=10, choices=AlertState.choices)
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["alert", "subscription", "alert_state"], name="delivery_once_per_state")
        ]

    def __str__(self) -> str:
        return f"{self.alert} -> {self.subscription} ({self.status})"
