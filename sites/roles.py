"""Who may do what, the access policy of the whole portal: the roles a user holds (selectors), granting them
(services), and POLICY, the one table of which role may take which action on which rows.

coordinator: everything (superusers count as coordinators). site-admin: edits the registry rows of the sites of
their memberships, writes their reports, acts on the alerts about them. ddm: a service scoped to one experiment (reads
its plan, sends its records, acts on its alerts). viewer: reads. An authenticated user without any membership reads
like a viewer. The actor is the user and its token's scope together: a token issued with one role acts with that
role alone (a superuser's too), and what it makes keeps that scope (`actor_scoped`).

Every page, export, feed and API asks this module: `Model.objects.restrict(user, action)` for rows, `object_for` to
load one (404 unseen, 403 seen but not allowed), `user_may`/`action_reach` where there is no row.

A user's memberships are read once per user object and kept on it (as NetBox keeps object permissions), so
the permission checks of one request cost one query; the services below drop that cache when they change it.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import Q, QuerySet
from django.http import Http404

from .choices import Role
from .models import Experiment, Membership, Site

logger = logging.getLogger(__name__)

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
    """Whether the actor may do everything: a superuser (unless a token limits it) or a holder of the coordinator
    role. The policy's own test: everywhere else ask `user_may(user=, action=)` or `restrict(user, action)`."""
    return any(grant.role == Role.COORDINATOR for grant in _actor_grants(user))


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
    """The roles the actor holds; a superuser holds coordinator (not through a token scoped to another role); an
    authenticated user with none is a viewer."""
    return {str(grant.role) for grant in _actor_grants(user)}


def sites_editable_by(*, user: Any) -> QuerySet[Site]:
    """The sites whose registry rows the user may change: all for a coordinator, their own for a site admin."""
    return sites_for(user=user, action="register")


def sites_for(*, user: Any, action: str) -> QuerySet[Site]:
    """The sites the actor may take `action` about (sites.models sits below this module, so Site has no restrict() of
    its own: this is it): every site when its reach is every row, else those of its site-admin grants."""
    reach = action_reach(user=user, action=action)
    return Site.objects.all() if reach.every else Site.objects.filter(pk__in=reach.site_ids)


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
    """The experiments whose plans the user may read: None for all; a DDM service sees its own only. The pages
    decide whether an anonymous caller reads at all (ANONYMOUS_READ): when they let one in, it reads everything."""
    if user is None or not user.is_authenticated:
        return None
    reach = action_reach(user=user, action="view")
    return None if reach.every else set(reach.experiment_ids)


def experiment_ids_read(*, user: Any, chosen: Experiment | None = None) -> set[int] | None:
    """The ids of the experiments whose rows the user reads, for SQL that takes them (the matrix, the failures):
    None for every row (no filter), narrowed to the experiment the reader `chosen`; one they may not read selects
    nothing."""
    visible = visible_experiment_ids(user)
    if chosen is None:
        return visible
    return {chosen.pk} if visible is None or chosen.pk in visible else set()


def experiments_visible(*, user: Any) -> QuerySet[Experiment]:
    """The experiments the user may read, as rows (sites.models sits below this module, so Experiment has no
    restrict() of its own: this is it)."""
    visible = visible_experiment_ids(user)
    experiments = Experiment.objects.all()
    return experiments if visible is None else experiments.filter(pk__in=visible)


class ExperimentRestrictedQuerySet(models.QuerySet[Any]):
    """A queryset that restricts itself to what a user may do (NetBox's `RestrictedQuerySet.restrict(user, action)`
    shape), for every model whose rows belong to an experiment: `experiment_field` names the path to it
    (`experiment_id`, `activity__experiment_id`), `site_fields` the paths to the sites a row is about (a site admin
    acts on those). `restrict(user)` reads; `restrict(user, action)` keeps the rows read that the POLICY table lets
    the actor take the action on (none for an action its roles do not have)."""

    experiment_field = "experiment_id"
    # True where the path crosses a one-to-many relation (a challenge's activities): each row is kept once.
    experiment_field_many = False
    site_fields: tuple[str, ...] = ()

    def restrict(self, user: Any, action: str = "view") -> Any:
        reach = action_reach(user=user, action=action)  # refuses an action the policy does not know
        visible = visible_experiment_ids(user)
        rows = self if visible is None else self.filter(**{f"{self.experiment_field}__in": visible})
        if action != "view" and not reach.every:
            allowed = Q()
            if reach.site_ids:
                for field in self.site_fields:
                    allowed |= Q(**{f"{field}__in": reach.site_ids})
            if reach.experiment_ids:
                allowed |= Q(**{f"{self.experiment_field}__in": reach.experiment_ids})
            rows = rows.filter(allowed) if allowed else rows.none()
        narrowed = visible is not None or (action != "view" and not reach.every)
        return rows.distinct() if self.experiment_field_many and narrowed else rows


class ActivityExperimentQuerySet(ExperimentRestrictedQuerySet):
    """Rows that belong to an experiment through their activity (targets, runs, sweeps)."""

    experiment_field = "activity__experiment_id"


class ExperimentSiteRestrictedQuerySet(ExperimentRestrictedQuerySet):
    """Rows of an experiment that are also about sites (an alert: its site, the ends of its link), which site admins
    act on (acknowledge, silence) when one of `site_fields` is one of their sites."""

    site_fields: tuple[str, ...] = ("site_id",)


# --- the access policy: who may do what, to which rows ---------------------------------------------------------

# How far a role's grant reaches for an action: every row the actor reads, the rows of the experiment a DDM
# service serves, or the rows about the site a site admin administers.
EVERY = "every"
EXPERIMENT = "experiment"
SITE = "site"

# The one table of the access policy: for each action, the roles that may take it and how far it reaches. "view"
# is decided by visible_experiment_ids (a DDM service reads its experiment's plan, everyone else every plan); every
# other action is taken only on rows the actor also reads. A role absent from an action's row may not take it.
POLICY: dict[str, dict[str, str]] = {
    "view": {Role.COORDINATOR: EVERY, Role.SITE_ADMIN: EVERY, Role.DDM: EXPERIMENT, Role.VIEWER: EVERY},
    "start": {Role.COORDINATOR: EVERY},  # runs and sweeps
    "cancel": {Role.COORDINATOR: EVERY},  # runs (and their copies) and sweeps
    "import": {Role.COORDINATOR: EVERY},  # a plan document, or a new challenge
    "edit": {Role.COORDINATOR: EVERY},  # the plan: challenges, activities, targets, failure rules
    "acknowledge": {Role.COORDINATOR: EVERY, Role.DDM: EXPERIMENT, Role.SITE_ADMIN: SITE},
    "silence": {Role.COORDINATOR: EVERY, Role.DDM: EXPERIMENT, Role.SITE_ADMIN: SITE},
    "subscribe": {Role.COORDINATOR: EVERY, Role.SITE_ADMIN: EVERY, Role.DDM: EXPERIMENT, Role.VIEWER: EVERY},
    "send": {Role.COORDINATOR: EVERY, Role.DDM: EXPERIMENT},  # transfer records and FTS optimizer decisions
    "register": {Role.COORDINATOR: EVERY, Role.SITE_ADMIN: SITE},  # a site's registry rows: its fields, endpoints...
    "report": {Role.COORDINATOR: EVERY, Role.SITE_ADMIN: SITE},  # write a site's report, comment on it
    "narrate": {Role.COORDINATOR: EVERY, Role.DDM: EXPERIMENT},  # write an experiment's report on a challenge
    "review": {Role.COORDINATOR: EVERY},  # accept a report, or ask for changes
    "publish": {Role.COORDINATOR: EVERY},  # the challenge report: its snapshots, their public links, its lessons
    "manage": {Role.COORDINATOR: EVERY},  # the registry, roles and tokens, everyone's subscriptions, the admin
}
ACTIONS = tuple(POLICY)


@dataclass(frozen=True)
class Reach:
    """Which rows an actor may take an action on: every row it reads, or those of these experiments or about these
    sites (nothing when all three are empty)."""

    every: bool = False
    experiment_ids: frozenset[int] = frozenset()
    site_ids: frozenset[int] = frozenset()

    def __bool__(self) -> bool:
        return self.every or bool(self.experiment_ids) or bool(self.site_ids)


def _actor_grants(user: Any) -> tuple[Grant, ...]:
    """The grants an actor acts with: its memberships (or its token's one), a superuser's coordinator powers unless
    a token limits it, and a viewer's for an authenticated user holding none."""
    if user is None or not user.is_authenticated or not user.is_active:
        return ()
    grants = _grants(user)
    if user.is_superuser and not getattr(user, _SCOPED_ATTRIBUTE, False):
        grants = (*grants, Grant(Role.COORDINATOR, None, None))
    return grants or (Grant(Role.VIEWER, None, None),)


def action_reach(*, user: Any, action: str) -> Reach:
    """How far the actor (the user, limited to its token's scope when it calls with one) may take `action`: the union
    of what each of its grants reaches by the POLICY table. ValueError for an action the policy does not know."""
    if action not in POLICY:
        raise ValueError(f"unknown action {action!r}: one of {', '.join(ACTIONS)}")
    rule = POLICY[action]
    experiment_ids: set[int] = set()
    site_ids: set[int] = set()
    for grant in _actor_grants(user):
        reach = rule.get(Role(grant.role))
        if reach == EVERY:
            return Reach(every=True)
        if reach == EXPERIMENT and grant.experiment_id is not None:
            experiment_ids.add(grant.experiment_id)
        if reach == SITE and grant.site_id is not None:
            site_ids.add(grant.site_id)
    return Reach(experiment_ids=frozenset(experiment_ids), site_ids=frozenset(site_ids))


def user_may(*, user: Any, action: str) -> bool:
    """Whether the actor may take `action` on anything at all (a page shows its button, a form opens): which rows,
    `Model.objects.restrict(user, action)` says."""
    return bool(action_reach(user=user, action=action))


def action_refusal(*, user: Any, action: str) -> str:
    """Why the access policy does not let the actor take `action` on a row, in the words of the POLICY table."""
    rule = POLICY.get(action, {})
    mine = {Role(grant.role) for grant in _actor_grants(user)}
    roles = [role for role in Role if role in rule]
    if not mine:
        return f"log in to {action}"
    reach_words = {EVERY: "", EXPERIMENT: " (those of its experiment)", SITE: " (those about their own sites)"}
    allowed = ", ".join(f"{role.label}{reach_words[rule[role]]}" for role in roles) or "nobody"
    held = ", ".join(sorted(role.label for role in mine))
    return f"{action}: your role ({held}) may not do this here; it takes a {allowed}"


def object_for(*, queryset: Any, user: Any, action: str = "view", **lookup: Any) -> Any:
    """The one row of `queryset` (a restricting queryset) matching `lookup`, loaded for the actor and `action`: a 404
    when the actor may not read it, a 403 when it reads it but may not take the action on it."""
    found = queryset.restrict(user, "view").filter(**lookup).first()
    if found is None:
        raise Http404(f"no {queryset.model._meta.verbose_name} matches the given query")
    if action != "view" and not queryset.restrict(user, action).filter(pk=found.pk).exists():
        raise PermissionDenied(action_refusal(user=user, action=action))
    return found


# A site's agent (SiteAgent) is no user and holds no role: the one thing it may do is take, report and end the work
# of its own site. Its rows (runs.AgentJob) name their site; these are the only ways an agent's view reads them.
def agent_restrict(*, queryset: QuerySet[Any], agent: Any) -> QuerySet[Any]:
    """The rows of `queryset` (which have a `site`) that are the agent's own site's work."""
    return queryset.filter(site_id=agent.site_id)


def agent_object_for(*, queryset: QuerySet[Any], agent: Any, **lookup: Any) -> Any:
    """One row for a site's agent: a 404 when there is none, a 403 (logged, with the agent and the row) when it is
    another site's work: an agent that asks for it is misconfigured or misbehaving, and operators should know."""
    found = queryset.filter(**lookup).first()
    if found is None:
        raise Http404(f"no {queryset.model._meta.verbose_name} matches the given query")
    if found.site_id != agent.site_id:
        logger.warning(
            "agent %s (site id %s) refused %s %s of site id %s",
            agent,
            agent.site_id,
            queryset.model._meta.verbose_name,
            found.pk,
            found.site_id,
        )
        raise PermissionDenied(f"{queryset.model._meta.verbose_name} {found.pk} is not your site's work")
    return found
