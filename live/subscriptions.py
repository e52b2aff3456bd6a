"""Who subscribed to which alerts: the subscriptions a user sees and manages, and saving them within the access
policy (a DDM service subscribes to its own experiment's alerts only; one made with a token keeps its scope). Which
subscriptions an alert goes to is live.audience's."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet

from challenges.selectors import challenges_visible
from sites.models import Experiment, Site
from sites.roles import action_reach, token_scope_of, user_may

from .delivery import subscription_deliveries_create
from .models import Alert, AlertDelivery, AlertSubscription
from .webhooks import webhook_url_problem

# The fields a subscription is saved with (the services' `fields`).
FIELDS = ("name", "url", "email", "format", "challenge", "experiments", "sites", "kinds", "active")


def subscriptions_visible_to(*, user: Any) -> QuerySet[AlertSubscription]:
    """The subscriptions the user sees and manages: every one for a coordinator, their own for anyone else."""
    queryset = AlertSubscription.objects.select_related(
        "challenge", "created_by", "scope_site", "scope_experiment"
    ).prefetch_related("experiments", "sites")
    return queryset if user_may(user=user, action="manage") else queryset.filter(created_by=user)


def deliveries_visible_to(*, user: Any) -> QuerySet[AlertDelivery]:
    """The deliveries the user may read: those of alerts the access policy lets them read and, for anyone but a
    coordinator, only to their own subscriptions (another's webhook answers are theirs)."""
    queryset = AlertDelivery.objects.select_related("subscription").filter(
        alert__in=Alert.objects.restrict(user, "view")
    )
    return queryset if user_may(user=user, action="manage") else queryset.filter(subscription__created_by=user)


def _scope_problems(*, user: Any, fields: dict[str, Any]) -> None:
    """Refuse (PermissionDenied) experiments the user may not subscribe to (the access policy's "subscribe": those it
    reads); a challenge they may not read is unknown."""
    reach = action_reach(user=user, action="subscribe")
    if reach.every:
        return
    visible = Experiment.objects.filter(pk__in=reach.experiment_ids)
    asked = fields.get("experiments") or []
    readable_ids = set(visible.filter(pk__in=[experiment.pk for experiment in asked]).values_list("pk", flat=True))
    hidden = sorted(experiment.name for experiment in asked if experiment.pk not in readable_ids)
    if hidden:
        readable = ", ".join(visible.order_by("name").values_list("name", flat=True))
        raise PermissionDenied(
            f"experiments: you may not subscribe to the alerts of {', '.join(hidden)}: your role reads those of "
            f"{readable or 'no experiment'} only"
        )
    challenge = fields.get("challenge")
    if challenge is not None and not challenges_visible(user=user).filter(pk=challenge.pk).exists():
        raise ValidationError({"challenge": f"no challenge {challenge.slug!r}"})


def _delivery_problems(*, url: str, email: str) -> None:
    """Exactly one place to deliver to, and a webhook the portal may post to."""
    if url and email:
        raise ValidationError(
            {"email": "give a webhook url or an e-mail address, not both (set the other to an empty string)"}
        )
    if not url and not email:
        raise ValidationError({"url": "give a webhook url or an e-mail address"})
    if url and (problem := webhook_url_problem(url)):
        raise ValidationError({"url": problem})


@transaction.atomic
def subscription_create(*, user: Any, fields: dict[str, Any]) -> AlertSubscription:
    """Subscribe `user` to alerts: `fields` as in FIELDS (challenge an object or None, experiments and sites lists
    of objects; empty lists take all). Raises ValidationError by field (no or two places to deliver to, a refused
    webhook) and PermissionDenied for experiments the user may not read."""
    _scope_problems(user=user, fields=fields)
    _delivery_problems(url=fields.get("url", ""), email=fields.get("email", ""))
    simple = {name: fields[name] for name in FIELDS if name in fields and name not in ("experiments", "sites")}
    scope = token_scope_of(user=user)  # made with a token: it keeps the token's scope as long as it lives
    subscription = AlertSubscription.objects.create(
        created_by=user if user.is_authenticated else None,
        scope_role=scope.role if scope else "",
        scope_site_id=scope.site_id if scope else None,
        scope_experiment_id=scope.experiment_id if scope else None,
        **simple,
    )
    subscription.experiments.set(fields.get("experiments") or [])
    subscription.sites.set(fields.get("sites") or [])
    _open_alerts_deliver(subscription)
    return subscription


def _open_alerts_deliver(subscription: AlertSubscription) -> None:
    """Send the subscription an "open" notice of each alert already open that it takes."""
    subscription_deliveries_create(subscription=subscription)


@transaction.atomic
def subscription_update(*, subscription: AlertSubscription, user: Any, fields: dict[str, Any]) -> AlertSubscription:
    """Change the given fields of a subscription (by its creator or a coordinator), with the checks of
    subscription_create; a webhook URL is checked again whenever it is given."""
    _scope_problems(user=user, fields=fields)
    url = fields.get("url", subscription.url)
    email = fields.get("email", subscription.email)
    if "url" in fields or "email" in fields:
        _delivery_problems(url=url, email=email)
    for name in FIELDS:
        if name in fields and name not in ("experiments", "sites"):
            setattr(subscription, name, fields[name])
    subscription.save()
    if "experiments" in fields:
        subscription.experiments.set(fields["experiments"])
    if "sites" in fields:
        subscription.sites.set(fields["sites"])
    # Switched on again, or taking more: the alerts open now that it has not been told of yet.
    _open_alerts_deliver(subscription)
    return subscription


def experiments_named(names: list[str]) -> tuple[list[Experiment], list[str]]:
    """The experiments of these names (ignoring case, as FTS and Rucio do) and the names that are none."""
    if not names:
        return [], []
    condition = Q()
    for name in names:
        condition |= Q(name__iexact=name)
    found = {experiment.name.lower(): experiment for experiment in Experiment.objects.filter(condition)}
    return list(found.values()), [name for name in names if name.lower() not in found]


def sites_named(names: list[str]) -> tuple[list[Site], list[str]]:
    """The sites of these names (exactly) and the names that are none."""
    found = {site.name: site for site in Site.objects.filter(name__in=names)}
    return list(found.values()), [name for name in names if name not in found]
