"""The permission matrix of the registry API: every role against every endpoint, reading and writing."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from sites.choices import Role
from sites.models import Capacity, Experiment, NetworkHost, Site, StorageEndpoint
from sites.roles import membership_grant
from sites.tokens import token_create

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "viewer", "ddm", "site-admin", "coordinator"]


@pytest.fixture
def registry() -> dict[str, Any]:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    own, other = (
        Site.objects.create(name="OWN", tier=1, country="IT"),
        Site.objects.create(name="OTHER", tier=1, country="DE"),
    )
    for site in (own, other):
        site.experiments.set([atlas, cms])
        endpoint = StorageEndpoint(site=site, kind="disk")
        endpoint.set_url(f"davs://{site.name.lower()}.example.org:443/data")
        endpoint.save()
        NetworkHost.objects.create(site=site, address=f"ps.{site.name.lower()}.example.org")
        Capacity.objects.create(site=site, network_rate=1e9)
    return {"atlas": atlas, "own": own, "other": other}


def client_for(role: str, registry: dict[str, Any]) -> APIClient:
    client = APIClient()
    if role == "anonymous":
        return client
    user = get_user_model().objects.create_user(f"user-{role}")
    scope: dict[str, Any] = {}
    if role == "site-admin":
        scope = {"site": registry["own"]}
    elif role == "ddm":
        scope = {"experiment": registry["atlas"]}
    membership_grant(user=user, role=Role(role), **scope)
    _, key = token_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


READ_EXPECTED = {"anonymous": 401, "viewer": 200, "ddm": 200, "site-admin": 200, "coordinator": 200}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("path", ["experiments", "sites", "endpoints", "hosts", "capacities"])
def test_reading_each_list(role: str, path: str, registry: dict[str, Any]) -> None:
    response = client_for(role, registry).get(f"/api/v1/{path}/")
    assert response.status_code == READ_EXPECTED[role]
    if response.status_code == 200:
        assert response.json()["count"] >= 2


def _change(client: APIClient, path: str, row: Any) -> int:
    bodies = {
        "sites": {"country": "FR"},
        "endpoints": {"kind": "tape"},
        "hosts": {"address": f"new.{row.pk}.example.org"},
        "capacities": {"network_rate": 2e9},
        "experiments": {"name": "ATLAS-RENAMED"},
    }
    return client.patch(f"/api/v1/{path}/{row.pk}/", bodies[path], format="json").status_code


def _row(path: str, site: Site, registry: dict[str, Any]) -> Any:
    return {
        "sites": site,
        "endpoints": site.endpoints.first(),
        "hosts": site.network_hosts.first(),
        "capacities": site.capacity,
        "experiments": registry["atlas"],
    }[path]


WRITE_OWN = {"anonymous": 401, "viewer": 403, "ddm": 403, "site-admin": 200, "coordinator": 200}
# A site admin's write querysets hold only their own sites: another site's row is not found.
WRITE_OTHER = {"anonymous": 401, "viewer": 403, "ddm": 403, "site-admin": 404, "coordinator": 200}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("path", ["sites", "endpoints", "hosts", "capacities"])
def test_changing_a_row_of_ones_own_site(role: str, path: str, registry: dict[str, Any]) -> None:
    client = client_for(role, registry)
    assert _change(client, path, _row(path, registry["own"], registry)) == WRITE_OWN[role]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("path", ["sites", "endpoints", "hosts", "capacities"])
def test_changing_a_row_of_another_site(role: str, path: str, registry: dict[str, Any]) -> None:
    client = client_for(role, registry)
    row = _row(path, registry["other"], registry)
    before = {field.name: getattr(row, field.attname) for field in type(row)._meta.concrete_fields}
    assert _change(client, path, row) == WRITE_OTHER[role]
    row.refresh_from_db()
    after = {field.name: getattr(row, field.attname) for field in type(row)._meta.concrete_fields}
    assert (after == before) is (WRITE_OTHER[role] != 200)


@pytest.mark.parametrize(
    ("role", "expected"), [("anonymous", 401), ("viewer", 403), ("ddm", 403), ("site-admin", 403), ("coordinator", 200)]
)
def test_only_coordinators_change_experiments(role: str, expected: int, registry: dict[str, Any]) -> None:
    assert _change(client_for(role, registry), "experiments", registry["atlas"]) == expected


@pytest.mark.parametrize(
    ("role", "expected"), [("anonymous", 401), ("viewer", 403), ("ddm", 403), ("site-admin", 403), ("coordinator", 201)]
)
def test_only_coordinators_create_sites(role: str, expected: int, registry: dict[str, Any]) -> None:
    body = {"name": "NEW", "tier": 2, "country": "ES", "experiments": ["ATLAS"]}
    assert client_for(role, registry).post("/api/v1/sites/", body, format="json").status_code == expected


@pytest.mark.parametrize(("role", "expected"), [("site-admin", 403), ("coordinator", 204)])
def test_only_coordinators_delete_sites(role: str, expected: int, registry: dict[str, Any]) -> None:
    response = client_for(role, registry).delete(f"/api/v1/sites/{registry['own'].pk}/")
    assert response.status_code == expected


@pytest.mark.parametrize("site", ["own", "other"])
def test_only_coordinators_assign_storage_doors_even_to_a_site_admins_own_site(
    site: str, registry: dict[str, Any]
) -> None:
    """Records are counted for the site that owns a door (scheme://host:port): a site admin who registered another
    site's door, or a door no site has yet, took that traffic."""
    body = {"site": registry[site].name, "url": f"root://new-{site}.example.org:1094//data", "kind": "disk"}
    response = client_for("site-admin", registry).post("/api/v1/endpoints/", body, format="json")
    assert response.status_code == 403
    assert not StorageEndpoint.objects.filter(url=body["url"]).exists()
    assert client_for("coordinator", registry).post("/api/v1/endpoints/", body, format="json").status_code == 201


def test_a_site_admin_edits_the_other_fields_of_their_endpoints_but_not_their_url_or_rse(
    registry: dict[str, Any],
) -> None:
    endpoint = StorageEndpoint(site=registry["own"], kind="disk")
    endpoint.set_url("root://own-door.example.org:1094//data")
    endpoint.save()
    client = client_for("site-admin", registry)
    assert client.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"kind": "tape"}, format="json").status_code == 200
    moved = {"url": "root://xfer.other.example.org:1094//data"}
    assert client.patch(f"/api/v1/endpoints/{endpoint.pk}/", moved, format="json").status_code == 403
    assert client.patch(f"/api/v1/endpoints/{endpoint.pk}/", {"rse": ["X_DISK"]}, format="json").status_code == 403
    endpoint.refresh_from_db()
    assert (endpoint.kind, endpoint.url, endpoint.rse_names) == ("tape", "root://own-door.example.org:1094//data", [])


def test_a_door_and_an_rse_belong_to_one_site(registry: dict[str, Any]) -> None:
    theirs = StorageEndpoint(site=registry["other"], rse_names=["OTHER_DISK"])
    theirs.set_url("davs://door.other.example.org:443/data")
    theirs.save()
    coordinator = client_for("coordinator", registry)
    same_door = {"site": registry["own"].name, "url": "davs://door.other.example.org:443/elsewhere"}
    response = coordinator.post("/api/v1/endpoints/", same_door, format="json")
    assert response.status_code == 400
    assert f"is a storage door of {registry['other'].name}" in response.json()["url"][0]
    other_port = {"site": registry["own"].name, "url": "davs://door.other.example.org:8443/data", "rse": ["OTHER_DISK"]}
    response = coordinator.post("/api/v1/endpoints/", other_port, format="json")
    assert response.status_code == 400 and "RSE OTHER_DISK belongs to" in response.json()["rse"][0]
    other_port["rse"] = ["OWN_DISK"]
    assert coordinator.post("/api/v1/endpoints/", other_port, format="json").status_code == 201


def test_a_ddm_token_cannot_rename_an_experiment(registry: dict[str, Any]) -> None:
    client = client_for("ddm", registry)
    cms = Experiment.objects.get(name="CMS")
    assert client.patch(f"/api/v1/experiments/{cms.pk}/", {"name": "CMS2"}, format="json").status_code == 403
    assert Experiment.objects.filter(name="CMS").exists()


@pytest.mark.parametrize(("field", "value"), [("name", "RENAMED"), ("tier", 3), ("experiments", ["ATLAS"])])
def test_a_site_admin_cannot_rename_retier_or_rescope_their_site(
    field: str, value: Any, registry: dict[str, Any]
) -> None:
    client = client_for("site-admin", registry)
    response = client.patch(f"/api/v1/sites/{registry['own'].pk}/", {field: value}, format="json")
    assert response.status_code == 400
    assert response.json()[field] == ["only coordinators change this"]
    registry["own"].refresh_from_db()
    assert (registry["own"].name, registry["own"].tier, registry["own"].experiments.count()) == ("OWN", 1, 2)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("path", ["endpoints", "hosts", "capacities"])
def test_deleting_a_row_of_ones_own_site(role: str, path: str, registry: dict[str, Any]) -> None:
    row = _row(path, registry["own"], registry)
    status = client_for(role, registry).delete(f"/api/v1/{path}/{row.pk}/").status_code
    expected = {"anonymous": 401, "viewer": 403, "ddm": 403, "site-admin": 403, "coordinator": 204}[role]
    assert status == expected
    assert type(row).objects.filter(pk=row.pk).exists() is (expected != 204)
