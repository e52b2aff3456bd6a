"""The registry API: validation errors, filters, pagination, derived fields, query counts."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from sites.choices import Role
from sites.models import Capacity, Experiment, Site, StorageEndpoint
from sites.roles import membership_grant

pytestmark = pytest.mark.django_db


@pytest.fixture
def coordinator() -> APIClient:
    user = get_user_model().objects.create_user("coord")
    membership_grant(user=user, role=Role.COORDINATOR)
    client = APIClient()
    client.force_authenticate(user)
    return client


def make_sites(count: int) -> None:
    atlas = Experiment.objects.create(name="ATLAS")
    for index in range(count):
        site = Site.objects.create(name=f"S{index:03d}", tier=index % 4, country="IT")
        site.experiments.add(atlas)
        Capacity.objects.create(site=site, network_rate=1e9)
        endpoint = StorageEndpoint(site=site)
        endpoint.set_url(f"root://s{index}.example.org:1094//data")
        endpoint.save()


def test_an_endpoint_url_with_a_scheme_we_cannot_speak_is_refused_with_the_field(coordinator: APIClient) -> None:
    Site.objects.create(name="A", tier=1, country="IT")
    response = coordinator.post("/api/v1/endpoints/", {"site": "A", "url": "ftp://a.example.org/x"}, format="json")
    assert response.status_code == 400
    assert "scheme 'ftp'" in response.json()["url"][0]
    assert not StorageEndpoint.objects.exists()


def test_file_endpoints_need_the_setting(coordinator: APIClient, settings: Any) -> None:
    Site.objects.create(name="A", tier=1, country="IT")
    body = {"site": "A", "url": "file:///srv/data"}
    assert coordinator.post("/api/v1/endpoints/", body, format="json").status_code == 400
    settings.SITES_ALLOW_FILE_ENDPOINTS = True
    assert coordinator.post("/api/v1/endpoints/", body, format="json").status_code == 201


def test_an_endpoint_stores_its_host_and_port_for_matching_records(coordinator: APIClient) -> None:
    Site.objects.create(name="A", tier=1, country="IT")
    body = {"site": "A", "url": "davs://XFER.example.org:8443/atlas", "tpc_modes": ["pull", "push"], "rse": ["A_DISK"]}
    data = coordinator.post("/api/v1/endpoints/", body, format="json").json()
    assert (data["scheme"], data["host"], data["port"], data["rse"]) == ("davs", "xfer.example.org", 8443, ["A_DISK"])


def test_a_bad_tier_and_country_are_both_reported(coordinator: APIClient) -> None:
    response = coordinator.post("/api/v1/sites/", {"name": "X", "tier": 7, "country": "Italy"}, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"tier", "country"}


def test_sites_filter_by_experiment_and_tier(coordinator: APIClient) -> None:
    make_sites(8)
    Site.objects.create(name="NOATLAS", tier=1, country="IT")
    data = coordinator.get("/api/v1/sites/", {"experiment": "atlas", "tier": 1}).json()
    assert [row["name"] for row in data["results"]] == ["S001", "S005"]


def test_pagination_is_bounded(coordinator: APIClient) -> None:
    make_sites(3)
    data = coordinator.get("/api/v1/sites/", {"limit": 100000}).json()
    assert data["count"] == 3
    assert coordinator.get("/api/v1/sites/", {"limit": 2}).json()["next"]


def test_the_site_list_takes_a_constant_number_of_queries(
    coordinator: APIClient, django_assert_max_num_queries: Any
) -> None:
    make_sites(30)
    with django_assert_max_num_queries(8):
        response = coordinator.get("/api/v1/sites/", {"limit": 1000})
    assert len(response.json()["results"]) == 30


def test_the_site_page_list_takes_a_constant_number_of_queries(client: Any, django_assert_max_num_queries: Any) -> None:
    make_sites(30)
    client.force_login(get_user_model().objects.create_user("viewer"))
    with django_assert_max_num_queries(10):
        response = client.get("/sites/")
    assert response.status_code == 200
    assert response.content.count(b'href="/sites/S0') == 30


def test_the_site_page_exports_csv(client: Any) -> None:
    make_sites(2)
    client.force_login(get_user_model().objects.create_user("viewer"))
    response = client.get("/sites/", {"format": "csv", "tier": 1})
    lines = response.content.decode().strip().splitlines()
    assert lines[0].startswith("name,tier,country")
    assert lines[1].startswith("S001,1,IT,ATLAS,1,1000000000.0")
    assert len(lines) == 2


def test_the_import_endpoint_lists_every_problem_and_stores_nothing(coordinator: APIClient) -> None:
    document = {
        "experiments": [{"name": "ATLAS"}],
        "sites": [{"name": "A", "tier": 9, "country": "it", "experiments": ["LHCB"]}],
    }
    response = coordinator.post("/api/v1/sites/import/", document, format="json")
    assert response.status_code == 400
    places = [error["place"] for error in response.json()["errors"]]
    assert places == ["sites[0].tier", "sites[0].country", "sites[0].experiments[0]"]
    assert not Site.objects.exists() and not Experiment.objects.exists()


def test_the_import_endpoint_takes_yaml_and_export_gives_it_back(coordinator: APIClient) -> None:
    text = "experiments: [{name: ATLAS}]\nsites:\n- {name: A, tier: 1, country: IT, experiments: [ATLAS]}\n"
    response = coordinator.generic("POST", "/api/v1/sites/import/", text, content_type="application/yaml")
    assert response.status_code == 200, response.content
    assert response.json()["sites"]["created"] == 1
    exported = coordinator.get("/api/v1/sites/export/").json()
    assert exported["sites"][0]["name"] == "A" and exported["sites"][0]["experiments"] == ["ATLAS"]


def test_only_coordinators_import(client: Any) -> None:
    api = APIClient()
    api.force_authenticate(get_user_model().objects.create_user("viewer"))
    assert api.post("/api/v1/sites/import/", {"experiments": [], "sites": []}, format="json").status_code == 403
