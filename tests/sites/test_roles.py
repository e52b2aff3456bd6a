"""Roles: who holds what (sites.roles), what the registry permissions make of it (sites.permissions), and the
mapping of OpenID Connect groups to roles (sites.oidc)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.test import override_settings
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from sites.choices import Role
from sites.models import Experiment, Membership, Site, StorageEndpoint
from sites.oidc import (
    GroupRole,
    PortalOIDCBackend,
    group_roles_parse,
    groups_from_claims,
    memberships_sync_from_groups,
    roles_for_groups,
)
from sites.permissions import DdmExperimentPermission, experiment_allowed, scope_for_write, site_in_request_allowed
from sites.roles import (
    membership_grant,
    sites_editable_by,
    user_experiment_ids,
    user_is_coordinator,
    user_roles,
    user_site_ids,
)

User = get_user_model()


def make_site(name: str) -> Site:
    return Site.objects.create(name=name, tier=1, country="IT")


def make_endpoint(site: Site, host: str) -> StorageEndpoint:
    endpoint = StorageEndpoint(site=site)
    endpoint.set_url(f"davs://{host}:443/data")
    endpoint.save()
    return endpoint


# --- selectors and the grant service ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_superuser_counts_as_a_coordinator_without_any_membership() -> None:
    user = User.objects.create_superuser("root", password="x")
    assert user_is_coordinator(user=user)
    assert Role.COORDINATOR in user_roles(user=user)


@pytest.mark.django_db
def test_a_user_without_memberships_reads_like_a_viewer() -> None:
    user = User.objects.create_user("nobody")
    assert user_roles(user=user) == {Role.VIEWER}
    assert not user_is_coordinator(user=user)
    assert user_site_ids(user=user) == set()


def test_an_anonymous_user_holds_no_role() -> None:
    anonymous = AnonymousUser()
    assert user_roles(user=anonymous) == set()
    assert not user_is_coordinator(user=anonymous)
    assert user_site_ids(user=anonymous) == set()


@pytest.mark.django_db
def test_an_inactive_coordinator_is_not_a_coordinator() -> None:
    user = User.objects.create_user("gone", is_active=False)
    membership_grant(user=user, role=Role.COORDINATOR)
    assert not user_is_coordinator(user=user)


@pytest.mark.django_db
def test_site_ids_hold_only_the_sites_of_site_admin_memberships() -> None:
    own, other = make_site("OWN"), make_site("OTHER")
    atlas = Experiment.objects.create(name="ATLAS")
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    membership_grant(user=user, role=Role.DDM, experiment=atlas)
    assert user_site_ids(user=user) == {own.pk}
    assert user_experiment_ids(user=user) == {atlas.pk}
    assert user_roles(user=user) == {Role.SITE_ADMIN, Role.DDM}
    assert list(sites_editable_by(user=user)) == [own]
    assert other not in sites_editable_by(user=user)


@pytest.mark.django_db
def test_a_coordinator_may_edit_every_site() -> None:
    make_site("A"), make_site("B")
    user = User.objects.create_user("coord")
    membership_grant(user=user, role=Role.COORDINATOR)
    assert sites_editable_by(user=user).count() == 2


@pytest.mark.django_db
def test_granting_a_role_twice_keeps_one_membership() -> None:
    site = make_site("OWN")
    user = User.objects.create_user("admin")
    first = membership_grant(user=user, role=Role.SITE_ADMIN, site=site)
    second = membership_grant(user=user, role=Role.SITE_ADMIN, site=site)
    assert first.pk == second.pk
    assert Membership.objects.filter(user=user).count() == 1


@pytest.mark.django_db
def test_a_grant_is_seen_by_the_same_user_object_at_once() -> None:
    user = User.objects.create_user("late")
    assert not user_is_coordinator(user=user)  # fills the per-user cache
    membership_grant(user=user, role=Role.COORDINATOR)
    assert user_is_coordinator(user=user)


@pytest.mark.django_db
def test_the_roles_of_a_request_cost_one_query(django_assert_num_queries: Any) -> None:
    site = make_site("OWN")
    membership_grant(user=User.objects.create_user("admin"), role=Role.SITE_ADMIN, site=site)
    user = User.objects.get(username="admin")
    with django_assert_num_queries(1):
        user_is_coordinator(user=user)
        user_site_ids(user=user)
        user_roles(user=user)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "scope", "problem"),
    [
        (Role.SITE_ADMIN, {}, "needs a site"),
        (Role.DDM, {}, "needs an experiment"),
        (Role.VIEWER, {"site": True}, "global"),
        (Role.COORDINATOR, {"experiment": True}, "global"),
        (Role.SITE_ADMIN, {"site": True, "experiment": True}, "not an experiment"),
        ("owner", {}, "unknown role"),
    ],
)
def test_a_grant_whose_scope_does_not_fit_the_role_is_refused(role: str, scope: dict[str, bool], problem: str) -> None:
    objects = {"site": make_site("OWN"), "experiment": Experiment.objects.create(name="ATLAS")}
    user = User.objects.create_user("someone")
    with pytest.raises(ValidationError, match=problem):
        membership_grant(user=user, role=role, **{key: objects[key] for key in scope})
    assert not Membership.objects.exists()


# --- permissions -----------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_write_querysets_of_a_site_admin_hold_only_their_sites() -> None:
    own, other = make_site("OWN"), make_site("OTHER")
    mine, theirs = make_endpoint(own, "own.example.org"), make_endpoint(other, "other.example.org")
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    scoped = scope_for_write(queryset=StorageEndpoint.objects.all(), user=user, site_lookup="site")
    assert list(scoped) == [mine]
    assert theirs not in scoped
    sites = scope_for_write(queryset=Site.objects.all(), user=user, site_lookup="pk")
    assert list(sites) == [own]


@pytest.mark.django_db
def test_write_querysets_of_a_coordinator_are_not_restricted() -> None:
    make_endpoint(make_site("A"), "a.example.org"), make_endpoint(make_site("B"), "b.example.org")
    user = User.objects.create_superuser("root", password="x")
    assert scope_for_write(queryset=StorageEndpoint.objects.all(), user=user, site_lookup="site").count() == 2


def body_request(body: dict[str, Any]) -> Request:
    return Request(APIRequestFactory().post("/", body, format="json"), parsers=[JSONParser()])


@pytest.mark.django_db
@pytest.mark.parametrize("by", ["id", "id-as-text", "name"])
def test_a_site_in_a_request_body_may_be_given_by_id_or_name(by: str) -> None:
    own = make_site("OWN")
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    value = {"id": own.pk, "id-as-text": str(own.pk), "name": own.name}[by]
    assert site_in_request_allowed(request=body_request({"site": value}), user=user)


@pytest.mark.django_db
def test_a_site_in_a_request_body_that_is_not_theirs_is_refused() -> None:
    own, other = make_site("OWN"), make_site("OTHER")
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    assert not site_in_request_allowed(request=body_request({"site": other.name}), user=user)
    assert not site_in_request_allowed(request=body_request({"site": "NOWHERE"}), user=user)
    assert not site_in_request_allowed(request=body_request({}), user=user)


@pytest.mark.django_db
def test_a_site_name_that_reads_as_their_sites_id_but_names_another_site_is_refused() -> None:
    own = make_site("OWN")
    make_site(str(own.pk))  # another site whose name is the text of OWN's id
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    assert not site_in_request_allowed(request=body_request({"site": str(own.pk)}), user=user)


@pytest.mark.django_db
def test_a_site_admin_cannot_delete_an_endpoint_of_their_own_site() -> None:
    own = make_site("OWN")
    endpoint = make_endpoint(own, "own.example.org")
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    client = APIClient()
    client.force_authenticate(user)
    assert client.delete(f"/api/v1/endpoints/{endpoint.pk}/").status_code == 403
    assert StorageEndpoint.objects.filter(pk=endpoint.pk).exists()


@pytest.mark.django_db
def test_a_site_admin_cannot_move_their_endpoint_to_another_site() -> None:
    own, other = make_site("OWN"), make_site("OTHER")
    endpoint = make_endpoint(own, "own.example.org")
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    client = APIClient()
    client.force_authenticate(user)
    response = client.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"site": other.name}, format="json")
    assert response.status_code == 403
    endpoint.refresh_from_db()
    assert endpoint.site == own


@pytest.mark.django_db
def test_a_site_admin_adds_an_endpoint_naming_their_site_by_id() -> None:
    own = make_site("OWN")
    user = User.objects.create_user("admin")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=own)
    client = APIClient()
    client.force_authenticate(user)
    body = {"site": own.pk, "url": "root://new.example.org:1094//data"}
    # The serializer takes names; what matters here is that the permission let the id through to validation.
    assert client.post("/api/v1/endpoints/", body, format="json").status_code != 403


@pytest.mark.django_db
def test_only_its_ddm_service_or_a_coordinator_may_send_an_experiments_records() -> None:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    service = User.objects.create_user("rucio-atlas")
    membership_grant(user=service, role=Role.DDM, experiment=atlas)
    assert experiment_allowed(user=service, experiment=atlas)
    assert experiment_allowed(user=service, experiment=atlas.pk)
    assert not experiment_allowed(user=service, experiment=cms)
    assert experiment_allowed(user=User.objects.create_superuser("root", password="x"), experiment=cms)
    assert not experiment_allowed(user=User.objects.create_user("viewer"), experiment=atlas)


# --- OpenID Connect groups -------------------------------------------------------------------------------------

MAPPING = "/atlas/coordinators=coordinator, /atlas=viewer, /atlas/ddm=ddm:ATLAS, /cern/admins=site-admin:CERN-PROD"


def test_the_group_mapping_is_parsed_with_scopes() -> None:
    assert group_roles_parse(text=MAPPING) == [
        GroupRole("/atlas/coordinators", "coordinator"),
        GroupRole("/atlas", "viewer"),
        GroupRole("/atlas/ddm", "ddm", "ATLAS"),
        GroupRole("/cern/admins", "site-admin", "CERN-PROD"),
    ]
    assert group_roles_parse(text="") == []


@pytest.mark.parametrize("text", ["/atlas=owner", "/atlas", "=viewer", "/atlas=site-admin", "/atlas=viewer:CERN"])
def test_a_bad_group_mapping_is_a_configuration_error(text: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="OIDC_GROUP_ROLES"):
        group_roles_parse(text=text)


def test_groups_map_to_the_roles_of_exactly_matching_entries() -> None:
    mapping = group_roles_parse(text=MAPPING)
    assert roles_for_groups(groups=["/atlas", "/atlas/coordinators"], mapping=mapping) == {
        GroupRole("", "viewer"),
        GroupRole("", "coordinator"),
    }
    # A subgroup grants nothing by itself: the issuer lists the parents it means.
    assert roles_for_groups(groups=["/atlas/coordinators/extra"], mapping=mapping) == set()
    # Issuers that drop the leading slash still match.
    assert roles_for_groups(groups=["atlas/ddm"], mapping=mapping) == {GroupRole("", "ddm", "ATLAS")}


def test_the_groups_claim_may_be_a_list_or_a_string() -> None:
    assert groups_from_claims(claims={"wlcg.groups": ["/atlas", "/cms"]}, claim="wlcg.groups") == ["/atlas", "/cms"]
    assert groups_from_claims(claims={"groups": "/atlas, /cms"}, claim="groups") == ["/atlas", "/cms"]
    assert groups_from_claims(claims={}, claim="wlcg.groups") == []


@pytest.mark.django_db
def test_syncing_grants_mapped_roles_and_takes_away_lost_ones_but_keeps_manual_ones() -> None:
    Experiment.objects.create(name="ATLAS")
    site = make_site("CERN-PROD")
    user = User.objects.create_user("oidc-123")
    other_site = make_site("OTHER")
    membership_grant(user=user, role=Role.SITE_ADMIN, site=other_site)  # granted by hand, not by the mapping
    mapping = group_roles_parse(text=MAPPING)

    memberships_sync_from_groups(user=user, groups=["/atlas/coordinators", "/cern/admins"], mapping=mapping)
    assert user_is_coordinator(user=user)
    assert user_site_ids(user=user) == {site.pk, other_site.pk}

    memberships_sync_from_groups(user=user, groups=["/atlas", "/atlas/ddm"], mapping=mapping)
    assert user_roles(user=user) == {Role.VIEWER, Role.DDM, Role.SITE_ADMIN}
    assert user_site_ids(user=user) == {other_site.pk}
    assert not user_is_coordinator(user=user)


@pytest.mark.django_db
def test_a_mapped_site_missing_from_the_registry_is_skipped() -> None:
    user = User.objects.create_user("oidc-123")
    held = memberships_sync_from_groups(
        user=user, groups=["/cern/admins"], mapping=group_roles_parse(text="/cern/admins=site-admin:NOWHERE")
    )
    assert held == set()
    assert not Membership.objects.exists()


OIDC_SETTINGS = {
    "OIDC_OP_TOKEN_ENDPOINT": "https://iam.example.org/token",
    "OIDC_OP_USER_ENDPOINT": "https://iam.example.org/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://iam.example.org/jwk",
    "OIDC_RP_CLIENT_ID": "portal",
    "OIDC_RP_CLIENT_SECRET": "secret",
    "OIDC_RP_SIGN_ALGO": "RS256",
    "OIDC_GROUPS_CLAIM": "wlcg.groups",
    "OIDC_GROUP_ROLES": "/atlas/coordinators=coordinator,/atlas=viewer",
}


@pytest.mark.django_db
@override_settings(**OIDC_SETTINGS)
def test_the_oidc_backend_matches_by_subject_and_maps_groups_on_login() -> None:
    User.objects.create_user("alice")  # a local account with the same preferred name is not taken over
    backend = PortalOIDCBackend()
    claims = {
        "sub": "5f1c-77",
        "preferred_username": "alice",
        "email": "alice@example.org",
        "given_name": "Alice",
        "wlcg.groups": ["/atlas", "/atlas/coordinators"],
    }
    assert backend.verify_claims(claims)
    assert not backend.filter_users_by_claims(claims).exists()
    user = backend.create_user(claims)
    assert user.username == "oidc-5f1c-77" and user.email == "alice@example.org"
    assert not user.has_usable_password()
    assert user_is_coordinator(user=user)
    assert list(backend.filter_users_by_claims(claims)) == [user]

    backend.update_user(user, {**claims, "wlcg.groups": ["/atlas"]})
    assert user_roles(user=user) == {Role.VIEWER}


@pytest.mark.django_db
def test_ddm_permission_lets_a_service_write_only_its_experiments_rows() -> None:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    service, viewer = User.objects.create_user("rucio-atlas"), User.objects.create_user("viewer")
    membership_grant(user=service, role=Role.DDM, experiment=atlas)
    permission = DdmExperimentPermission()

    def request(user: Any, method: str = "post") -> Request:
        wrapped = Request(getattr(APIRequestFactory(), method)("/"))
        wrapped.user = user
        return wrapped

    class Row:
        def __init__(self, experiment: Experiment) -> None:
            self.experiment_id = experiment.pk

    assert permission.has_permission(request(service), view=None)
    assert not permission.has_permission(request(viewer), view=None)
    assert permission.has_permission(request(viewer, "get"), view=None)
    assert not permission.has_permission(request(AnonymousUser(), "get"), view=None)
    assert permission.has_object_permission(request(service), view=None, obj=Row(atlas))
    assert not permission.has_object_permission(request(service), view=None, obj=Row(cms))


@pytest.mark.django_db
def test_the_querysets_restrict_themselves_to_what_a_ddm_service_may_read() -> None:
    from challenges.models import Activity, Target
    from results.models import TransferRecord
    from runs.models import Run
    from sites.models import Experiment
    from sites.roles import membership_grant
    from tests.challenges.factories import ActivityFactory, TargetFactory
    from tests.sites.factories import UserFactory

    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    for experiment in (atlas, cms):
        target = TargetFactory(activity=ActivityFactory(experiment=experiment))
        Run.objects.create(activity=target.activity, kind="transfer")
    ddm = UserFactory(username="atlas-ddm")
    membership_grant(user=ddm, role="ddm", experiment=atlas)
    viewer = UserFactory(username="viewer")
    membership_grant(user=viewer, role="viewer")
    for model, path in ((Activity, "experiment"), (Target, "activity__experiment"), (Run, "activity__experiment")):
        assert set(model.objects.restrict(ddm).values_list(f"{path}__name", flat=True)) == {"ATLAS"}
        assert model.objects.restrict(viewer).count() == 2
    assert not TransferRecord.objects.restrict(ddm).filter(experiment=cms).exists()
    with pytest.raises(ValueError, match="unknown action 'change'"):
        Activity.objects.restrict(ddm, "change")


@pytest.mark.django_db
def test_a_challenge_restricts_itself_through_its_activities_each_challenge_once() -> None:
    from challenges.models import Challenge
    from results.models import RateRollup
    from sites.roles import experiments_visible
    from tests.challenges.factories import ActivityFactory, ChallengeFactory
    from tests.sites.factories import UserFactory

    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    both, cms_only = ChallengeFactory(slug="both"), ChallengeFactory(slug="cms-only")
    ActivityFactory(challenge=both, experiment=atlas, name="a1")
    ActivityFactory(challenge=both, experiment=atlas, name="a2")
    ActivityFactory(challenge=both, experiment=cms, name="c1")
    ActivityFactory(challenge=cms_only, experiment=cms, name="c2")
    RateRollup.objects.create(minute="2026-01-05T00:00Z", experiment_id=cms.pk, bytes=1)
    ddm = UserFactory(username="atlas-ddm")
    membership_grant(user=ddm, role="ddm", experiment=atlas)
    viewer = UserFactory(username="viewer")
    membership_grant(user=viewer, role="viewer")

    assert list(Challenge.objects.restrict(ddm).values_list("slug", flat=True)) == ["both"]
    assert Challenge.objects.restrict(viewer).count() == 2
    assert list(experiments_visible(user=ddm).values_list("name", flat=True)) == ["ATLAS"]
    assert experiments_visible(user=viewer).count() == 2
    assert not RateRollup.objects.restrict(ddm).exists()
    assert RateRollup.objects.restrict(viewer).count() == 1
