"""The sites document: loading, validation (every problem with its place), import all or nothing, export, and
the import_sites / export_sites commands."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from sites.documents import SitesDocumentError, sites_document_load
from sites.models import Capacity, Experiment, NetworkHost, Site, StorageEndpoint
from sites.services import sites_export, sites_import
from testbed.grid import Testbed, TestbedConfig

from .factories import (
    CapacityFactory,
    ExperimentFactory,
    NetworkHostFactory,
    SiteFactory,
    StorageEndpointFactory,
)

pytestmark = pytest.mark.django_db

MODELS = (Experiment, Site, StorageEndpoint, NetworkHost, Capacity, Site.experiments.through)


def cnaf() -> dict[str, Any]:
    return {
        "name": "CNAF",
        "tier": 1,
        "country": "IT",
        "experiments": ["ATLAS"],
        "contacts": ["ops@cnaf.example"],
        "latitude": 44.5,
        "longitude": 11.3,
        "capacity": {
            "network_rate": 12.5e9,
            "tape_drives": 20,
            "tape_drive_rate": 360e6,
            "staging_request_limit": 100000,
            "disk_size": 1e15,
            "tape_size": 5e16,
        },
        "endpoints": [
            {
                "url": "davs://xfer.cr.cnaf.infn.it:8443/atlas",
                "implementation": "StoRM",
                "kind": "disk",
                "tpc_modes": ["pull", "push", "streamed"],
                "rse": ["CNAF_DATADISK"],
            },
            {"url": "root://xfer.cr.cnaf.infn.it:1094//tape", "implementation": "CTA", "kind": "tape"},
        ],
        "network_hosts": ["perfsonar.cr.cnaf.infn.it"],
    }


def good_document() -> dict[str, Any]:
    return {
        "experiments": [{"name": "ATLAS"}, {"name": "CMS"}],
        "sites": [cnaf(), {"name": "DESY", "tier": 2, "country": "DE", "experiments": ["ATLAS", "CMS"]}],
    }


def ten_error_document() -> dict[str, Any]:
    """Ten distinct problems around one valid site."""
    return {
        "experiments": [{"name": "ATLAS"}, {"name": "atlas"}],
        "sites": [
            cnaf(),
            {
                "name": "BAD",
                "tier": 4,
                "country": "it",
                "experiments": ["LHCb"],
                "capacity": {"tape_drives": 2.5, "disk_size": -1},
                "endpoints": [{"url": "ftp://x.example.org/data", "kind": "floppy"}],
                "colour": "red",
            },
            {"tier": 1, "country": "CH"},
        ],
    }


TEN_ERROR_PLACES = [
    "experiments[1].name",
    "sites[1].colour",
    "sites[1].tier",
    "sites[1].country",
    "sites[1].experiments[0]",
    "sites[1].capacity.tape_drives",
    "sites[1].capacity.disk_size",
    "sites[1].endpoints[0].url",
    "sites[1].endpoints[0].kind",
    "sites[2].name",
]


def row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in MODELS}


def errors_of(document: dict[str, Any]) -> list[dict[str, str]]:
    with pytest.raises(SitesDocumentError) as caught:
        sites_import(document=document)
    return caught.value.errors


def normalized(document: dict[str, Any]) -> dict[str, Any]:
    """A document with the optional empties dropped and lists in export order, to compare documents."""
    result = copy.deepcopy(document)
    for site in result["sites"]:
        for key in ("contacts", "endpoints", "network_hosts", "latitude", "longitude"):
            if site.get(key) in ([], None):
                site.pop(key, None)
        for endpoint in site.get("endpoints", []):
            for key in ("tpc_modes", "rse"):
                if not endpoint.get(key):
                    endpoint.pop(key, None)
        site.get("endpoints", []).sort(key=lambda endpoint: endpoint["url"])
        site.get("network_hosts", []).sort()
        site["experiments"].sort()
    result["sites"].sort(key=lambda site: (site["tier"], site["name"]))
    result["experiments"].sort(key=lambda experiment: experiment["name"])
    return result


def document_of_the_testbed(tmp_path: Path) -> dict[str, Any]:
    return Testbed(TestbedConfig(directory=tmp_path)).sites_document()


def test_a_good_document_imports_every_part() -> None:
    summary = sites_import(document=good_document())

    site = Site.objects.get(name="CNAF")
    assert (site.tier, site.country, site.contacts, site.latitude) == (1, "IT", ["ops@cnaf.example"], 44.5)
    assert list(site.experiments.values_list("name", flat=True)) == ["ATLAS"]
    assert site.capacity.tape_rate == 20 * 360e6
    assert site.capacity.disk_size == 10**15
    endpoint = StorageEndpoint.objects.get(url="davs://xfer.cr.cnaf.infn.it:8443/atlas")
    assert (endpoint.scheme, endpoint.host, endpoint.port) == ("davs", "xfer.cr.cnaf.infn.it", 8443)
    assert (endpoint.implementation, endpoint.tpc_modes, endpoint.rse_names) == (
        "StoRM",
        ["pull", "push", "streamed"],
        ["CNAF_DATADISK"],
    )
    assert list(site.network_hosts.values_list("address", flat=True)) == ["perfsonar.cr.cnaf.infn.it"]
    assert (summary.experiments.created, summary.sites.created, summary.endpoints.created) == (2, 2, 2)


def test_a_document_with_ten_errors_reports_all_ten_with_their_places() -> None:
    errors = errors_of(ten_error_document())

    assert [error["place"] for error in errors] == TEN_ERROR_PLACES
    assert all(error["error"] for error in errors)


def test_a_document_with_errors_stores_nothing_even_for_its_valid_sites() -> None:
    SiteFactory(name="KEPT", experiments=[ExperimentFactory(name="ALICE")])
    before = row_counts()

    errors_of(ten_error_document())

    assert row_counts() == before
    assert not Site.objects.filter(name="CNAF").exists()


def test_a_repeated_import_creates_no_duplicates_and_reports_updates() -> None:
    sites_import(document=good_document())
    before = row_counts()

    summary = sites_import(document=good_document())

    assert row_counts() == before
    assert summary.as_dict() == {
        "experiments": {"created": 0, "updated": 2, "deleted": 0},
        "sites": {"created": 0, "updated": 2, "deleted": 0},
        "capacities": {"created": 0, "updated": 1, "deleted": 0},
        "endpoints": {"created": 0, "updated": 2, "deleted": 0},
        "network_hosts": {"created": 0, "updated": 1, "deleted": 0},
    }


def test_import_export_import_export_is_lossless() -> None:
    sites_import(document=good_document())
    first = sites_export()

    sites_import(document=json.loads(json.dumps(first)))

    assert sites_export() == first


def test_export_after_import_gives_the_document_back() -> None:
    document = good_document()
    document["sites"][0]["endpoints"][1]["implementation"] = "cta"  # stored and exported as "CTA"

    sites_import(document=document)

    assert normalized(sites_export()) == normalized(good_document())


def test_a_capacity_without_known_fields_survives_a_round_trip() -> None:
    document = good_document()
    document["sites"][1]["capacity"] = {}
    sites_import(document=document)

    exported = sites_export()

    assert exported["sites"][1]["capacity"] == {}
    assert Capacity.objects.get(site__name="DESY").network_rate is None


def test_a_yaml_document_imports_like_its_json() -> None:
    text = yaml.safe_dump(good_document(), sort_keys=False)

    sites_import(document=sites_document_load(text=text, content_type="application/yaml"))

    assert normalized(sites_export()) == normalized(good_document())


def test_yaml_is_recognised_without_a_content_type() -> None:
    text = "experiments:\n  - name: ATLAS\nsites:\n  - {name: CNAF, tier: 1, country: IT, experiments: [ATLAS]}\n"

    assert sites_document_load(text=text)["sites"][0]["name"] == "CNAF"


def test_unparsable_json_is_a_document_error_with_its_position() -> None:
    with pytest.raises(SitesDocumentError) as caught:
        sites_document_load(text=b'{"sites": [}', content_type="application/json")

    assert caught.value.errors[0]["place"] == "document"
    assert "column 12" in caught.value.errors[0]["error"]


@pytest.mark.parametrize("allow_file", [False, True])
def test_the_testbed_document_imports_whatever_the_file_endpoint_setting(
    tmp_path: Path, settings: Any, allow_file: bool
) -> None:
    settings.SITES_ALLOW_FILE_ENDPOINTS = allow_file
    document = document_of_the_testbed(tmp_path)

    sites_import(document=document)

    assert normalized(sites_export()) == normalized(document)
    assert NetworkHost.objects.filter(address__startswith="127.0.0.1:").exists()


def test_file_endpoints_need_the_setting(settings: Any) -> None:
    document = good_document()
    document["sites"][1]["endpoints"] = [{"url": "file:///srv/desy"}]
    settings.SITES_ALLOW_FILE_ENDPOINTS = False
    assert [error["place"] for error in errors_of(document)] == ["sites[1].endpoints[0].url"]

    settings.SITES_ALLOW_FILE_ENDPOINTS = True
    sites_import(document=document)

    assert StorageEndpoint.objects.get(url="file:///srv/desy").scheme == "file"


def test_an_endpoint_url_of_another_site_is_rejected() -> None:
    StorageEndpointFactory(site=SiteFactory(name="OTHER"), url="davs://xfer.cr.cnaf.infn.it:8443/atlas")

    errors = errors_of(good_document())

    assert errors == [{"place": "sites[0].endpoints[0].url", "error": "this URL belongs to site 'OTHER'"}]


def test_a_network_host_of_another_site_is_rejected() -> None:
    NetworkHostFactory(site=SiteFactory(name="OTHER"), address="perfsonar.cr.cnaf.infn.it")

    errors = errors_of(good_document())

    assert [error["place"] for error in errors] == ["sites[0].network_hosts[0]"]


def test_a_url_listed_twice_in_the_document_is_rejected_at_its_second_place() -> None:
    document = good_document()
    document["sites"][1]["endpoints"] = [{"url": "davs://xfer.cr.cnaf.infn.it:8443/atlas"}]

    errors = errors_of(document)

    assert errors == [{"place": "sites[1].endpoints[0].url", "error": "this URL repeats sites[0].endpoints[0].url"}]


def test_a_boolean_is_not_a_tier() -> None:
    document = good_document()
    document["sites"][1]["tier"] = True

    assert [error["place"] for error in errors_of(document)] == ["sites[1].tier"]


def test_repeated_tpc_modes_and_unknown_ones_are_rejected() -> None:
    document = good_document()
    document["sites"][0]["endpoints"][0]["tpc_modes"] = ["pull", "pull", "carrier-pigeon"]

    places = [error["place"] for error in errors_of(document)]

    assert places == ["sites[0].endpoints[0].tpc_modes[1]", "sites[0].endpoints[0].tpc_modes[2]"]


def test_endpoints_and_network_hosts_absent_from_the_document_are_deleted() -> None:
    site = SiteFactory(name="CNAF")
    StorageEndpointFactory(site=site, url="root://old.cr.cnaf.infn.it//data")
    NetworkHostFactory(site=site, address="old-perfsonar.cr.cnaf.infn.it")

    summary = sites_import(document=good_document())

    assert sorted(site.endpoints.values_list("url", flat=True)) == sorted(
        endpoint["url"] for endpoint in cnaf()["endpoints"]
    )
    assert list(site.network_hosts.values_list("address", flat=True)) == ["perfsonar.cr.cnaf.infn.it"]
    assert (summary.endpoints.deleted, summary.network_hosts.deleted) == (1, 1)


def test_sites_absent_from_the_document_are_left_alone() -> None:
    other = SiteFactory(name="ELSEWHERE")
    StorageEndpointFactory(site=other)
    CapacityFactory(site=other)

    sites_import(document=good_document())

    assert other.endpoints.count() == 1
    assert Capacity.objects.filter(site=other).exists()


def test_a_site_s_experiments_become_exactly_the_listed_ones() -> None:
    SiteFactory(name="DESY", experiments=[ExperimentFactory(name="LHCb")])

    sites_import(document=good_document())

    assert sorted(Site.objects.get(name="DESY").experiments.values_list("name", flat=True)) == ["ATLAS", "CMS"]


def test_capacity_fields_absent_from_the_document_become_unknown() -> None:
    CapacityFactory(site=SiteFactory(name="CNAF"))
    document = good_document()
    document["sites"][0]["capacity"] = {"network_rate": 1e9}

    sites_import(document=document)

    capacity = Capacity.objects.get(site__name="CNAF")
    assert (capacity.network_rate, capacity.tape_drives, capacity.disk_size) == (1e9, None, None)


def test_experiments_match_existing_ones_ignoring_case() -> None:
    ExperimentFactory(name="cms")
    document = good_document()
    document["experiments"] = [{"name": "ATLAS"}]  # CMS is only referenced, as "CMS"

    sites_import(document=document)

    assert sorted(Experiment.objects.values_list("name", flat=True)) == ["ATLAS", "cms"]
    assert Site.objects.get(name="DESY").experiments.count() == 2


def test_an_experiment_neither_declared_nor_registered_is_rejected() -> None:
    document = good_document()
    document["sites"][1]["experiments"] = ["ATLAS", "LHCb"]

    assert [error["place"] for error in errors_of(document)] == ["sites[1].experiments[1]"]


def test_the_implementation_is_accepted_in_any_case_and_stored_canonically() -> None:
    document = good_document()
    document["sites"][0]["endpoints"][0]["implementation"] = "STORM"

    sites_import(document=document)

    assert StorageEndpoint.objects.get(url="davs://xfer.cr.cnaf.infn.it:8443/atlas").implementation == "StoRM"


def many_sites_document(count: int) -> dict[str, Any]:
    sites = []
    for index in range(count):
        site = cnaf()
        site["name"] = f"S{index:03d}"
        site["endpoints"] = [
            {**endpoint, "url": endpoint["url"].replace("xfer.", f"xfer{index}.")} for endpoint in site["endpoints"]
        ]
        site["network_hosts"] = [f"ps{index}.example.org"]
        for endpoint in site["endpoints"]:  # an RSE belongs to one site
            endpoint["rse"] = [f"{rse}_{index}" for rse in endpoint.get("rse", [])]
        sites.append(site)
    return {"experiments": [{"name": "ATLAS"}], "sites": sites}


def test_import_queries_do_not_grow_with_the_number_of_sites(django_assert_max_num_queries: Any) -> None:
    sites_import(document=many_sites_document(2))
    with django_assert_max_num_queries(30) as few:
        sites_import(document=many_sites_document(3))
    with django_assert_max_num_queries(len(few.captured_queries)):
        sites_import(document=many_sites_document(30))


def test_export_takes_a_constant_number_of_queries(django_assert_num_queries: Any) -> None:
    sites_import(document=many_sites_document(20))

    with django_assert_num_queries(6):  # sites, their experiments, endpoints, theirs, network hosts, all experiments
        sites_export()


def test_export_of_some_sites_lists_only_their_experiments() -> None:
    sites_import(document=good_document())

    exported = sites_export(sites=Site.objects.filter(name="CNAF"))

    assert (exported["experiments"], [site["name"] for site in exported["sites"]]) == ([{"name": "ATLAS"}], ["CNAF"])


def test_the_import_command_fails_on_a_bad_file_and_prints_every_place(tmp_path: Path) -> None:
    path = tmp_path / "sites.json"
    path.write_text(json.dumps(ten_error_document()))
    stderr = io.StringIO()
    before = row_counts()

    with pytest.raises(CommandError, match="10 problems"):
        call_command("import_sites", str(path), stderr=stderr)

    assert all(f"{place}: " in stderr.getvalue() for place in TEN_ERROR_PLACES)
    assert row_counts() == before


def test_the_import_command_reads_a_yaml_file_and_prints_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "sites.yaml"
    path.write_text(yaml.safe_dump(good_document()))
    stdout = io.StringIO()

    call_command("import_sites", str(path), stdout=stdout)

    assert "sites: 2 created, 0 updated" in stdout.getvalue()
    assert Site.objects.count() == 2


def test_the_import_command_reads_standard_input(monkeypatch: Any) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(good_document()).encode())))

    call_command("import_sites", "-", stdout=io.StringIO())

    assert Site.objects.count() == 2


def test_the_export_command_writes_yaml_that_imports_back(tmp_path: Path) -> None:
    sites_import(document=good_document())
    exported = sites_export()
    path = tmp_path / "out.yaml"

    call_command("export_sites", "--format", "yaml", "--output", str(path), stdout=io.StringIO())

    assert sites_document_load(text=path.read_text()) == exported


def test_a_storage_door_or_an_rse_of_another_site_is_refused_in_a_document() -> None:
    sites_import(document={"experiments": [{"name": "ATLAS"}], "sites": [cnaf()]})
    intruder = cnaf()
    intruder["name"] = "INTRUDER"
    intruder["network_hosts"] = []
    intruder["endpoints"] = [
        {"url": "davs://xfer.cr.cnaf.infn.it:8443/intruder", "rse": ["INTRUDER_DISK"]},
        {"url": "root://intruder.example.org:1094//data", "rse": ["CNAF_DATADISK"]},
    ]
    with pytest.raises(SitesDocumentError) as caught:
        sites_import(document={"experiments": [{"name": "ATLAS"}], "sites": [intruder]})
    errors = {error["place"]: error["error"] for error in caught.value.errors}
    assert "this storage door belongs to site 'CNAF'" in errors["sites[0].endpoints[0].url"]
    assert errors["sites[0].endpoints[1].rse[0]"] == "RSE CNAF_DATADISK belongs to site 'CNAF'"
