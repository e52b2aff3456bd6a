"""DRF permissions of the portal's API: the access policy of sites.roles (its POLICY table) at the API's doors.

Reading needs an authenticated user (any role, or none). Writing the registry: coordinators everything; a site
admin changes their own sites' fields and adds or changes the endpoints, network hosts and capacity of their
sites, but never creates or deletes a site or touches an experiment; DDM services and viewers write nothing (the
policy's "register" action). Which rows a write may reach is decided by the querysets (`scope_for_write`), so
another site's row is a 404. The plan and what acts on it (runs, sweeps, imports) take the policy's action that the
view names (`PlanPermission.policy_actions`), row by row through `restrict(user, action)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model, Q, QuerySet
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from common.units import is_whole_number

from .models import Experiment, Site
from .roles import action_reach, action_refusal, user_may

# Viewset actions by HTTP method, for views that are not viewsets.
_ACTIONS_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "partial_update", "DELETE": "destroy"}


def _action(request: Request, view: Any) -> str | None:
    action: str | None = getattr(view, "action", None)
    if action is None and getattr(view, "action_map", None) is None:
        action = _ACTIONS_BY_METHOD.get(request.method or "")
    return action


def _view_model(view: Any) -> type[Model] | None:
    queryset = getattr(view, "queryset", None)
    if queryset is None and hasattr(view, "get_queryset"):
        queryset = view.get_queryset()
    return queryset.model if queryset is not None else None


def _is_child_of_site(model: type[Model] | None) -> bool:
    """Rows that belong to one site through a `site` field: endpoints, network hosts, capacity."""
    if model is None:
        return False
    try:
        field = model._meta.get_field("site")
    except FieldDoesNotExist:  # any other model is for coordinators only
        return False
    return getattr(field, "related_model", None) is Site


def _sites_named(value: Any) -> set[int] | None:
    """Ids of the sites a request's `site` names, by id or by name; None when it names none."""
    if isinstance(value, bool) or value in (None, ""):
        return None
    text = str(value).strip()
    condition = Q(name=text)
    if is_whole_number(text):
        condition |= Q(pk=int(text))
    ids = set(Site.objects.filter(condition).values_list("pk", flat=True))
    return ids or None


def site_in_request_allowed(*, request: Request, user: Any) -> bool:
    """Whether the `site` of the request body (an id or a name) is one the user administers. A name that could
    also be another site's id must point only at their sites."""
    data = request.data
    if not isinstance(data, Mapping):
        return False
    named = _sites_named(data.get("site"))
    return named is not None and named <= action_reach(user=user, action="register").site_ids


class IsCoordinator(BasePermission):
    """Coordinators (and superusers) only."""

    message = "Only coordinators may do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        return user_may(user=request.user, action="manage")


class RegistryPermission(BasePermission):
    """Authenticated users read; coordinators write; site admins change their own sites' rows (see the module)."""

    message = "Your role does not allow this change."
    # What a site admin may do to a Site row and to rows that belong to a site.
    site_actions = frozenset({"update", "partial_update"})
    child_actions = frozenset({"create", "update", "partial_update"})

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        reach = action_reach(user=user, action="register")
        if request.method in SAFE_METHODS or reach.every:
            return True
        if not reach.site_ids:
            return False
        model, action = _view_model(view), _action(request, view)
        if model is Site:
            return action in self.site_actions
        if _is_child_of_site(model) and action in self.child_actions:
            # A new row must go to one of their sites; a change is checked against its row in
            # has_object_permission, after the scoped queryset has turned another site's row into a 404.
            return action != "create" or site_in_request_allowed(request=request, user=user)
        return False

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        user = request.user
        reach = action_reach(user=user, action="register")
        if request.method in SAFE_METHODS or reach.every:
            return True
        site_ids, action = reach.site_ids, _action(request, view)
        if isinstance(obj, Site):
            return action in self.site_actions and obj.pk in site_ids
        if isinstance(obj, Experiment) or action not in self.child_actions:
            return False
        if getattr(obj, "site_id", None) not in site_ids:
            return False
        # Moving a row to another site needs that site to be theirs as well.
        data = request.data
        return not (isinstance(data, Mapping) and "site" in data) or site_in_request_allowed(request=request, user=user)


def scope_for_write(*, queryset: QuerySet[Any], user: Any, site_lookup: str) -> QuerySet[Any]:
    """The rows of `queryset` the user may change: all for a coordinator, those whose site (reached by
    `site_lookup`, e.g. "site" or "pk" for sites themselves) they administer for anyone else."""
    reach = action_reach(user=user, action="register")
    if reach.every:
        return queryset
    return queryset.filter(**{f"{site_lookup}__in": reach.site_ids})


def experiment_allowed(*, user: Any, experiment: Experiment | int) -> bool:
    """Whether the user may ingest records of the experiment (the access policy's "send"): a coordinator, or its DDM
    service."""
    reach = action_reach(user=user, action="send")
    experiment_id = experiment if isinstance(experiment, int) else experiment.pk
    return reach.every or experiment_id in reach.experiment_ids


class DdmExperimentPermission(BasePermission):
    """For ingestion: authenticated users read; writes need a coordinator or a DDM service, and a row's
    `experiment` must be one of the service's (check a request body's experiment with `experiment_allowed`)."""

    message = "Only the DDM service of this experiment (or a coordinator) may send its records."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or user_may(user=user, action="send")

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        experiment_id = obj.pk if isinstance(obj, Experiment) else getattr(obj, "experiment_id", None)
        return experiment_id is not None and experiment_allowed(user=request.user, experiment=experiment_id)


class PlanPermission(BasePermission):
    """Everyone logged in reads; a write takes the access policy's action that `policy_actions` names for the view's
    action (`write_action` for the others): the actor must hold a role that may take it (403), and on the row it
    writes, `Model.objects.restrict(user, action)` must keep that row (403; a row it does not read is a 404 before)."""

    write_action = "edit"
    policy_actions: Mapping[str, str] = {}

    def policy_action(self, request: Request, view: Any) -> str:
        return self.policy_actions.get(_action(request, view) or "", self.write_action)

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return True
        action = self.policy_action(request, view)
        if user_may(user=request.user, action=action):
            return True
        self.message = getattr(type(self), "message", None) or action_refusal(user=request.user, action=action)
        return False

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        action = self.policy_action(request, view)
        rows = getattr(type(obj)._default_manager, "restrict", None)
        if rows is None:  # a model without an experiment: the role decides
            return user_may(user=request.user, action=action)
        return bool(rows(request.user, action).filter(pk=obj.pk).exists())
