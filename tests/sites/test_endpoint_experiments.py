"""A storage endpoint serves some of its site's experiments (empty: all of them): in the sites document, its export
and the registry API."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from sites.choices import Role
from sites.documents import SitesDocumentError
from sites.models import StorageEndpoint
from sites.roles import membership_grant
from sites.services import sites_export, sites_import
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory

pytestmark = pytest.mark.django_db

ATLAS_URL = "root://eosatlas.cern.ch//eos/atlas"
CMS_URL = "root://eoscms.cern.ch//eos/cms"


def document() -> dict[str, Any]:
    return {
        "experiments": [{"name": "ATLAS"}, {"name": "CMS"}],
        "sites": [
            {
                "name": "CERN",
                "tier": 0,
                "country": "CH",
                "experiments": ["ATLAS", "CMS"],
                "endpoints": [
                    {"url": ATLAS_URL, "rse": ["CERN-PROD_DATADISK"], "experiments": ["atlas"]},
                    {"url": CMS_URL, "rse": ["T0_CH_CERN_Disk"], "experiments": ["CMS"]},
                    {"url": "root://eospublic.cern.ch//eos"},
                ],
            }
        ],
    }


def served(url: str) -> list[str]:
    return sorted(StorageEndpoint.objects.get(url=url).experiments.values_list("name", flat=True))


@pytest.fixture
def coordinator() -> APIClient:
    user = get_user_model().objects.create_user("coord")
    membership_grant(user=user, role=Role.COORDINATOR)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_document_gives_each_endpoint_its_experiments() -> None:
    sites_import(document=document())

    assert served(ATLAS_URL) == ["ATLAS"]
    assert served(CMS_URL) == ["CMS"]
    assert served("root://eospublic.cern.ch//eos") == []


def test_the_export_gives_the_endpoints_experiments_back_in_the_sites_spelling() -> None:
    sites_import(document=document())
    endpoints = sites_export()["sites"][0]["endpoints"]

    assert {endpoint["url"]: endpoint.get("experiments") for endpoint in endpoints} == {
        ATLAS_URL: ["ATLAS"],
        CMS_URL: ["CMS"],
        "root://eospublic.cern.ch//eos": None,
    }


def test_importing_again_makes_an_endpoints_experiments_exactly_the_documents() -> None:
    sites_import(document=document())
    changed = copy.deepcopy(document())
    changed["sites"][0]["endpoints"][0]["experiments"] = ["CMS"]
    del changed["sites"][0]["endpoints"][1]["experiments"]
    sites_import(document=changed)

    assert served(ATLAS_URL) == ["CMS"]
    assert served(CMS_URL) == []


def test_an_endpoint_experiment_its_site_does_not_serve_is_an_error_by_place_and_nothing_is_stored() -> None:
    bad = document()
    bad["sites"][0]["experiments"] = ["ATLAS"]
    bad["sites"][0]["endpoints"][1]["experiments"] = ["CMS", "X"]
    with pytest.raises(SitesDocumentError) as caught:
        sites_import(document=bad)

    assert caught.value.errors == [
        {
            "place": "sites[0].endpoints[1].experiments[0]",
            "error": "no experiment named 'CMS' among this site's experiments (ATLAS): add it to the site's",
        },
        {
            "place": "sites[0].endpoints[1].experiments[1]",
            "error": "no experiment named 'X' among this site's experiments (ATLAS): add it to the site's",
        },
    ]
    assert not StorageEndpoint.objects.exists()


def test_endpoint_experiments_must_be_a_list_of_names_without_repeats() -> None:
    bad = document()
    bad["sites"][0]["endpoints"][0]["experiments"] = "ATLAS"
    bad["sites"][0]["endpoints"][1]["experiments"] = ["CMS", "cms"]
    with pytest.raises(SitesDocumentError) as caught:
        sites_import(document=bad)

    assert [error["place"] for error in caught.value.errors] == [
        "sites[0].endpoints[0].experiments",
        "sites[0].endpoints[1].experiments[1]",
    ]


def test_the_api_shows_an_endpoints_experiments(coordinator: APIClient) -> None:
    sites_import(document=document())
    rows = coordinator.get("/api/v1/endpoints/").json()["results"]

    assert {row["url"]: row["experiments"] for row in rows}[ATLAS_URL] == ["ATLAS"]


def test_the_api_sets_an_endpoints_experiments_among_its_sites(coordinator: APIClient) -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    SiteFactory(name="CERN", experiments=[atlas])
    body = {"site": "CERN", "url": ATLAS_URL, "experiments": ["ATLAS"]}
    created = coordinator.post("/api/v1/endpoints/", body, format="json")
    assert created.status_code == 201
    assert served(ATLAS_URL) == ["ATLAS"]

    refused = coordinator.patch(f"/api/v1/endpoints/{created.json()['id']}/", {"experiments": ["CMS"]}, format="json")

    assert refused.status_code == 400
    assert refused.json()["experiments"] == ["CMS not among the experiments of site CERN: add them to the site first"]
    assert served(ATLAS_URL) == ["ATLAS"]
    assert cms.pk  # CMS exists: it is the site, not the registry, that does not serve it


def test_the_api_refuses_an_unknown_experiment_name(coordinator: APIClient) -> None:
    SiteFactory(name="CERN")
    response = coordinator.post(
        "/api/v1/endpoints/", {"site": "CERN", "url": ATLAS_URL, "experiments": ["NOPE"]}, format="json"
    )

    assert response.status_code == 400
    assert "experiments" in response.json()


def test_the_endpoint_list_takes_a_constant_number_of_queries(
    coordinator: APIClient, django_assert_max_num_queries: Any
) -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    site = SiteFactory(name="CERN", experiments=[atlas, cms])
    for index in range(20):
        StorageEndpointFactory(site=site, url=f"root://se{index}.cern.ch//x", experiments=[atlas, cms])
    with django_assert_max_num_queries(6):
        rows = coordinator.get("/api/v1/endpoints/", {"limit": 100}).json()["results"]
    assert len(rows) == 20
