"""Optional login through OpenID Connect (INDIGO IAM and other WLCG token issuers), off unless OIDC_ENABLED.

Users are matched by the issuer's stable `sub` claim (never by e-mail or a chosen username, which a local account
could share). On every login the groups claim (OIDC_GROUPS_CLAIM, "wlcg.groups" by default) is mapped to roles by
OIDC_GROUP_ROLES, for example "/atlas/coordinators=coordinator,/atlas=viewer,/atlas/ddm=ddm:ATLAS,
/cern/admins=site-admin:CERN-PROD": the roles the mapping names are granted or taken away to match the groups,
while roles granted by hand (create_token, the admin) are left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from .choices import Role
from .models import Experiment, Site
from .roles import membership_grant, membership_revoke

logger = logging.getLogger(__name__)

USERNAME_PREFIX = "oidc-"


@dataclass(frozen=True)
class GroupRole:
    """One entry of OIDC_GROUP_ROLES: members of `group` hold `role`, scoped to the site or experiment named
    `scope` (site-admin: a site, ddm: an experiment, the others: none)."""

    group: str
    role: str
    scope: str = ""


def _normalise_group(group: str) -> str:
    # IAM sends "/atlas/coordinators"; some issuers drop the leading slash.
    group = group.strip()
    return group if group.startswith("/") else f"/{group}"


def group_roles_parse(*, text: str) -> list[GroupRole]:
    """Parse OIDC_GROUP_ROLES: comma-separated `group=role` or `group=role:scope` entries. Raises
    ImproperlyConfigured on an unknown role or a scope that does not fit the role."""
    entries = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        group, separator, grant = item.partition("=")
        role, _, scope = grant.strip().partition(":")
        role, scope = role.strip(), scope.strip()
        if not separator or not group.strip() or not role:
            raise ImproperlyConfigured(f"OIDC_GROUP_ROLES: {item!r} is not group=role or group=role:scope")
        if role not in Role.values:
            raise ImproperlyConfigured(f"OIDC_GROUP_ROLES: {item!r}: unknown role, one of {', '.join(Role.values)}")
        if (role in (Role.SITE_ADMIN, Role.DDM)) != bool(scope):
            raise ImproperlyConfigured(
                f"OIDC_GROUP_ROLES: {item!r}: site-admin takes a site (site-admin:NAME), ddm an experiment "
                "(ddm:NAME), the other roles no scope"
            )
        entries.append(GroupRole(group=_normalise_group(group), role=role, scope=scope))
    return entries


def groups_from_claims(*, claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups in the claims: a list of strings, or one string separated by spaces or commas."""
    value = claims.get(claim)
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return [str(group) for group in value if str(group).strip()]


def roles_for_groups(*, groups: Iterable[str], mapping: Iterable[GroupRole]) -> set[GroupRole]:
    """The mapping entries the groups match (exactly, so /atlas does not grant what /atlas/coordinators does;
    issuers list parent groups themselves). Returned with an empty `group`, as the grants to hold."""
    held = {_normalise_group(group) for group in groups}
    return {GroupRole(group="", role=entry.role, scope=entry.scope) for entry in mapping if entry.group in held}


def _scope_objects(grant: GroupRole) -> dict[str, Any] | None:
    """The site or experiment a grant names, as membership arguments; None when it is not in the registry."""
    if grant.role == Role.SITE_ADMIN:
        site = Site.objects.filter(name=grant.scope).first()
        return None if site is None else {"site": site}
    if grant.role == Role.DDM:
        experiment = Experiment.objects.filter(name__iexact=grant.scope).first()
        return None if experiment is None else {"experiment": experiment}
    return {}


@transaction.atomic
def memberships_sync_from_groups(*, user: Any, groups: Iterable[str], mapping: Iterable[GroupRole]) -> set[GroupRole]:
    """Make the user's roles that the mapping manages match their groups: grant the matched ones, revoke the
    others the mapping names. Roles the mapping does not name stay. Returns the grants now held."""
    entries = list(mapping)
    wanted = roles_for_groups(groups=groups, mapping=entries)
    managed = {GroupRole(group="", role=entry.role, scope=entry.scope) for entry in entries}
    held = set()
    for grant in sorted(managed, key=lambda grant: (grant.role, grant.scope)):
        scope = _scope_objects(grant)
        if scope is None:
            if grant in wanted:
                logger.warning("OIDC_GROUP_ROLES names %s %r, which is not in the registry", grant.role, grant.scope)
            continue
        if grant in wanted:
            membership_grant(user=user, role=grant.role, **scope)
            held.add(grant)
        else:
            membership_revoke(user=user, role=grant.role, **scope)
    return held


def oidc_username(*, claims: Mapping[str, Any]) -> str:
    """The local username of an OIDC identity: a fixed prefix and the issuer's subject."""
    return f"{USERNAME_PREFIX}{claims['sub']}"[:150]


class PortalOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, matching users by `sub` and mapping their groups to roles on each login."""

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        if not claims.get("sub"):
            return self.UserModel.objects.none()
        return self.UserModel.objects.filter(username=oidc_username(claims=claims))

    def create_user(self, claims: dict[str, Any]) -> Any:
        user = self.UserModel.objects.create_user(oidc_username(claims=claims))
        return self.update_user(user, claims)

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        user.email = claims.get("email", user.email) or ""
        user.first_name = (claims.get("given_name") or user.first_name or "")[:150]
        user.last_name = (claims.get("family_name") or user.last_name or "")[:150]
        user.save(update_fields=["email", "first_name", "last_name"])
        memberships_sync_from_groups(
            user=user,
            groups=groups_from_claims(claims=claims, claim=getattr(settings, "OIDC_GROUPS_CLAIM", "wlcg.groups")),
            mapping=group_roles_parse(text=getattr(settings, "OIDC_GROUP_ROLES", "")),
        )
        return user
