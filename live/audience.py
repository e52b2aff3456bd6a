"""Who an alert goes to: the subscriptions that take it (their challenge, experiments, sites and kinds) and whether
each one's actor may read it, under the access policy (sites.roles)."""

from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from sites.roles import actor_scoped

from .models import Alert, AlertSubscription


def subscriptions_matching(*, alert: Alert) -> QuerySet[AlertSubscription]:
    """The active subscriptions whose challenge, experiments, sites and kinds take the alert (an empty list takes
    everything; sites take the alert's site or either end of its link). Who may read it is not decided here."""
    experiments = AlertSubscription.experiments.through.objects.filter(alertsubscription_id=OuterRef("pk"))
    sites = AlertSubscription.sites.through.objects.filter(alertsubscription_id=OuterRef("pk"))
    takes_experiment: Any = ~Exists(experiments)
    if alert.experiment_id is not None:
        takes_experiment |= Exists(experiments.filter(experiment_id=alert.experiment_id))
    site_ids = [site_id for site_id in (alert.site_id, alert.link_source_id, alert.link_destination_id) if site_id]
    return (
        AlertSubscription.objects.filter(active=True)
        .filter(Q(challenge__isnull=True) | Q(challenge_id=alert.challenge_id))
        .filter(Q(kinds=[]) | Q(kinds__contains=[alert.kind]))
        .filter(takes_experiment)
        .filter(~Exists(sites) | Exists(sites.filter(site_id__in=site_ids)))
        .select_related("created_by")
        .order_by("id")
    )


def subscription_reads_alert(*, subscription: AlertSubscription, alert: Alert) -> bool:
    """Whether the subscription's actor may read the alert under the access policy: its creator's roles as they are
    now, within the scope of the token it was made with (sites.roles.actor_scoped). A subscription nobody created
    (made in the admin) is a coordinator's; a deactivated creator's gets nothing, nor one whose creator no longer
    holds its token's role."""
    if subscription.created_by is None:
        return True
    actor = actor_scoped(user=subscription.created_by, scope=subscription.scope())
    return actor is not None and Alert.objects.restrict(actor, "view").filter(pk=alert.pk).exists()
