"""Who may do what: the roles a user holds (selectors) and granting them (services).

coordinator: everything (superusers count as coordinators). site-admin: edits the registry rows of the sites of
their memberships. ddm: a service scoped to one experiment (ingests its transfer records, reads the rest).
viewer: reads. An authenticated user without any membership reads like a viewer.

A user's memberships are read once per user object and kept on it (as NetBox keeps object permissions), so
the permission checks of one request cost one query; the services below drop that cache when they change it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, QuerySet

from .choices import Role
from .models import Experiment, Membership, Site

_CACHE_ATTRIBUTE = "_sites_memberships"
_SCOPED_ATTRIBUTE = "_sites_token_scoped"


@dataclass(frozen=True)
class Grant:
    """One role with its scope, as plain values: a membership, or the scope a token carries (and that what the
    token made keeps)."""

    role: str
    site_id: int | None
    experiment_id: int | None


def _grants(user: Any) -> tuple[Grant, ...]:
    """The user's memberships as plain values, read once per user object."""
    if user is None or not user.is_authenticated:
        return ()
    cached: tuple[Grant, ...] | None = getattr(user, _CACHE_ATTRIBUTE, None)
    if cached is None:
        cached = tuple(
            Grant(role, site_id, experiment_id)
            for role, site_id, experiment_id in Membership.objects.filter(user=user).values_list(
                "role", "site_id", "experiment_id"
            )
        )
        setattr(user, _CACHE_ATTRIBUTE, cached)
    return cached


def token_scope_apply(*, user: Any, membership: Membership) -> None:
    """Limit this request's user to the one role its token carries (no other membership, no superuser powers)."""
    setattr(user, _CACHE_ATTRIBUTE, (Grant(membership.role, membership.site_id, membership.experiment_id),))
    setattr(user, _SCOPED_ATTRIBUTE, True)


def token_scope_of(*, user: Any) -> Grant | None:
    """The one role this request's token carries, or None when the user acts with all of their roles (a login, a
    token issued without a role). What the request makes stores it: it keeps that scope as long as it lives."""
    if not getattr(user, _SCOPED_ATTRIBUTE, False):
        return None
    (grant,) = getattr(user, _CACHE_ATTRIBUTE)
    return grant


def actor_scoped(*, user: Any, scope: Grant | None) -> Any | None:
    """Who acts for something a user made (a subscription, which reads alerts long after the request): the user's
    roles as they are now, limited to the token scope it was made with (their memberships ∩ that scope). None when
    the actor may do nothing: the user is gone or inactive, or no longer holds the scope's role (an actor holding no
    role would otherwise read as a viewer, everything). The user object itself is left as it is."""
    if user is None or not user.is_active:
        return None
    if scope is None:
        return user
    actor = copy.copy(user)
    _forget(actor)
    if scope not in _grants(actor):
        return None
    setattr(actor, _CACHE_ATTRIBUTE, (scope,))
    setattr(actor, _SCOPED_ATTRIBUTE, True)
    return actor


def _forget(user: Any) -> None:
    if hasattr(user, _CACHE_ATTRIBUTE):
        delattr(user, _CACHE_ATTRIBUTE)


def user_is_coordinator(*, user: Any) -> bool:
    """Whether the user may do everything: a superuser or a holder of the coordinator role."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    superuser = bool(user.is_superuser) and not getattr(user, _SCOPED_ATTRIBUTE, False)
    return superuser or any(grant.role == Role.COORDINATOR for grant in _grants(user))


def user_site_ids(*, user: Any) -> set[int]:
    """Ids of the sites the user administers through site-admin memberships (a coordinator's are not listed:
    ask `sites_editable_by` for the sites a user may edit)."""
    return {grant.site_id for grant in _grants(user) if grant.role == Role.SITE_ADMIN and grant.site_id is not None}


def user_experiment_ids(*, user: Any) -> set[int]:
    """Ids of the experiments the user serves as a DDM service."""
    return {
        grant.experiment_id for grant in _grants(user) if grant.role == Role.DDM and grant.experiment_id is not None
    }


def user_roles(*, user: Any) -> set[str]:
    """The roles the user holds; a superuser holds coordinator; an authenticated user with none is a viewer."""
    if user is None or not user.is_authenticated:
        return set()
    roles = {grant.role for grant in _grants(user)}
    if user.is_superuser:
        roles.add(Role.COORDINATOR.value)
    return roles or {Role.VIEWER.value}


def sites_editable_by(*, user: Any) -> QuerySet[Site]:
    """The sites whose registry rows the user may change: all for a coordinator, their own for a site admin."""
    if user_is_coordinator(user=user):
        return Site.objects.all()
    return Site.objects.filter(pk__in=user_site_ids(user=user))


def membership_scope_problem(*, role: str, site: Site | None, experiment: Experiment | None) -> str | None:
    """Why a role cannot be held with this scope, or None when it fits."""
    if role not in Role.values:
        return f"unknown role {role!r}: one of {', '.join(Role.values)}"
    problems = {
        # (has a site, has an experiment): the problem, for each role; absent pairs fit.
        Role.SITE_ADMIN: {
            (False, False): "a site admin needs a site",
            (False, True): "a site admin needs a site, not an experiment",
            (True, True): "a site admin is scoped to a site, not an experiment",
        },
        Role.DDM: {
            (False, False): "a DDM service needs an experiment",
            (True, False): "a DDM service needs an experiment, not a site",
            (True, True): "a DDM service is scoped to an experiment, not a site",
        },
    }
    global_problem = f"the {role} role is global: give it no site and no experiment"
    global_problems = {(True, False): global_problem, (False, True): global_problem, (True, True): global_problem}
    return problems.get(Role(role), global_problems).get((site is not None, experiment is not None))


def membership_grant(
    *, user: Any, role: str, site: Site | None = None, experiment: Experiment | None = None
) -> Membership:
    """Give the user a role (site-admin with a site, ddm with an experiment, the others with neither).
    Granting a role the user already holds returns the existing membership. Raises ValidationError when the
    scope does not fit the role."""
    problem = membership_scope_problem(role=role, site=site, experiment=experiment)
    if problem:
        raise ValidationError(problem, code="scope")
    membership, _ = Membership.objects.get_or_create(user=user, role=role, site=site, experiment=experiment)
    _forget(user)
    return membership


def membership_revoke(*, user: Any, role: str, site: Site | None = None, experiment: Experiment | None = None) -> bool:
    """Take a role (with that exact scope) away from the user; False when they did not hold it."""
    deleted, _ = Membership.objects.filter(user=user, role=role, site=site, experiment=experiment).delete()
    _forget(user)
    return deleted > 0


def visible_experiment_ids(user: Any) -> set[int] | None:
    """The experiments whose plans the user may read: None for all; a DDM service sees its own only."""
    if user_is_coordinator(user=user) or user_roles(user=user) - {"ddm"}:
        return None
    return user_experiment_ids(user=user) if "ddm" in user_roles(user=user) else None


def experiments_visible(*, user: Any) -> QuerySet[Experiment]:
    """The experiments the user may read, as rows (sites.models sits below this module, so Experiment has no
    restrict() of its own: this is it)."""
    visible = visible_experiment_ids(user)
    experiments = Experiment.objects.all()
    return experiments if visible is None else experiments.filter(pk__in=visible)


class ExperimentRestrictedQuerySet(models.QuerySet[Any]):
    """A queryset that restricts itself to what a user may read (NetBox's `RestrictedQuerySet.restrict(user,
    action)` shape), for every model whose rows belong to an experiment: `experiment_field` names the path to it
    (`experiment_id`, `activity__experiment_id`). The one rule, visible_experiment_ids, is this module's; writes
    are decided by the DRF permissions and the services."""

    experiment_field = "experiment_id"
    # True where the path crosses a one-to-many relation (a challenge's activities): each row is kept once.
    experiment_field_many = False

    def restrict(self, user: Any, action: str = "view") -> Any:
        if action != "view":
            raise ValueError(f"restrict() decides reading only, not {action!r}: writes go through the services")
        visible = visible_experiment_ids(user)
        if visible is None:
            return self
        restricted = self.filter(**{f"{self.experiment_field}__in": visible})
        return restricted.distinct() if self.experiment_field_many else restricted


class ActivityExperimentQuerySet(ExperimentRestrictedQuerySet):
    """Rows that belong to an experiment through their activity (targets, runs)."""

    experiment_field = "activity__experiment_id"


class ExperimentSiteRestrictedQuerySet(ExperimentRestrictedQuerySet):
    """Rows of an experiment that are also about sites (an alert: its site, the ends of its link), which people act
    on (acknowledge, silence). Read as every experiment's rows; acted on, of the rows the user reads, by a
    coordinator (every one), a DDM service (its experiment's) and a site admin (those about one of their sites, by
    any of `site_fields`), never by a viewer, whatever the row."""

    site_fields: tuple[str, ...] = ("site_id",)
    act_actions = frozenset({"acknowledge", "silence"})

    def restrict(self, user: Any, action: str = "view") -> Any:
        if action not in self.act_actions:
            return super().restrict(user, action)
        readable = super().restrict(user, "view")
        if user_is_coordinator(user=user):
            return readable
        allowed = Q()
        if site_ids := user_site_ids(user=user):
            for field in self.site_fields:
                allowed |= Q(**{f"{field}__in": site_ids})
        if experiment_ids := user_experiment_ids(user=user):
            allowed |= Q(**{f"{self.experiment_field}__in": experiment_ids})
        return readable.filter(allowed) if allowed else readable.none()
