"""The one matcher from a storage URL to its site and endpoint (sites.matching): default ports both ways, the
longest path prefix, the experiments an endpoint serves, case, trailing slashes, RSE names, and no match. Each rule
is checked through the one-URL form and the preloaded index that a batch uses, which must agree."""

from __future__ import annotations

import pytest

from sites.documents import SitesDocumentError
from sites.matching import EndpointIndex, EndpointMatch, storage_for_url, url_parts
from sites.models import Site, StorageEndpoint
from sites.services import sites_import
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory

pytestmark = pytest.mark.django_db


def matched(url: str, experiment_id: int | None = None) -> tuple[Site | None, StorageEndpoint | None]:
    """The one-URL form, after checking that the batch index gives the same match."""
    site, endpoint = storage_for_url(url, experiment_id=experiment_id)
    batch = EndpointIndex.load().match(url, experiment_id=experiment_id)
    expected = None if site is None else EndpointMatch(site.pk, endpoint.pk if endpoint else None)
    assert batch == expected
    return site, endpoint


def test_a_url_without_its_port_matches_an_endpoint_that_writes_the_default_port() -> None:
    endpoint = StorageEndpointFactory(url="root://se.example.org:1094//data")

    assert matched("root://se.example.org//data/file")[1] == endpoint


def test_a_url_with_the_default_port_matches_an_endpoint_that_writes_none() -> None:
    endpoint = StorageEndpointFactory(url="davs://se.example.org/data")

    assert matched("davs://se.example.org:443/data/file")[1] == endpoint


@pytest.mark.parametrize(
    ("scheme", "port"),
    [("root", 1094), ("xroot", 1094), ("davs", 443), ("https", 443), ("http", 80), ("gsiftp", 2811), ("srm", 8443)],
)
def test_each_scheme_has_its_default_port(scheme: str, port: int) -> None:
    assert url_parts(f"{scheme}://se.example.org/data").port == port


def test_another_port_of_the_same_host_is_another_door() -> None:
    here = StorageEndpointFactory(url="root://se.example.org:1094//data")
    StorageEndpointFactory(url="root://se.example.org:1095//data")

    assert matched("root://se.example.org//data/file")[1] == here


def test_the_longest_path_prefix_decides_among_the_endpoints_of_a_door() -> None:
    StorageEndpointFactory(url="root://se.example.org//data")
    atlas = StorageEndpointFactory(url="root://se.example.org//data/atlas")

    assert matched("root://se.example.org//data/atlas/file")[1] == atlas


def test_a_path_prefix_counts_by_whole_segments() -> None:
    data = StorageEndpointFactory(url="root://se.example.org//data")
    StorageEndpointFactory(url="root://se.example.org//data/atlas")

    assert matched("root://se.example.org//data/atlas2/file")[1] == data


def test_several_sites_on_one_door_are_told_apart_by_their_paths() -> None:
    first = StorageEndpointFactory(url="file:///srv/site-a")
    second = StorageEndpointFactory(url="file:///srv/site-b")

    assert matched("file:///srv/site-b/file")[0] == second.site
    assert matched("file:///srv/site-a/file")[0] == first.site


def test_trailing_and_doubled_slashes_do_not_change_the_match() -> None:
    endpoint = StorageEndpointFactory(url="root://se.example.org//eos/atlas/")

    assert matched("root://se.example.org/eos/atlas/file")[1] == endpoint
    assert matched("root://se.example.org//eos/atlas")[1] == endpoint


def test_scheme_and_host_match_in_any_case() -> None:
    endpoint = StorageEndpointFactory(url="root://se.example.org//data")

    assert matched("ROOT://SE.Example.ORG:1094//data/file")[1] == endpoint


def test_the_path_matches_in_its_case() -> None:
    StorageEndpointFactory(url="root://se.example.org//data")
    other = StorageEndpointFactory(url="root://se.example.org//Data", site=StorageEndpoint.objects.get().site)

    assert matched("root://se.example.org//Data/file")[1] == other


def test_an_alias_of_the_scheme_matches_by_path() -> None:
    StorageEndpointFactory(url="davs://se.example.org/other")
    endpoint = StorageEndpointFactory(url="davs://se.example.org/data", site=StorageEndpoint.objects.get().site)

    assert matched("https://se.example.org/data/file")[1] == endpoint


def test_a_query_is_not_part_of_the_path() -> None:
    endpoint = StorageEndpointFactory(url="srm://storm.example.org:8444/srm/managerv2")

    assert matched("srm://storm.example.org:8444/srm/managerv2?SFN=/atlas/file")[1] == endpoint


def test_an_endpoint_that_does_not_serve_the_experiment_is_passed_over() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    site = SiteFactory(experiments=[atlas, cms])
    general = StorageEndpointFactory(site=site, url="root://se.example.org//data")
    StorageEndpointFactory(site=site, url="root://se.example.org//data/cms", experiments=[cms])

    assert matched("root://se.example.org//data/cms/file", atlas.pk)[1] == general


def test_an_endpoint_that_names_the_experiment_serves_it() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    site = SiteFactory(experiments=[atlas, cms])
    StorageEndpointFactory(site=site, url="root://se.example.org//data")
    named = StorageEndpointFactory(site=site, url="root://se.example.org//data/cms", experiments=[cms])

    assert matched("root://se.example.org//data/cms/file", cms.pk)[1] == named


def test_an_endpoint_naming_no_experiment_serves_only_its_sites() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    site = SiteFactory(experiments=[atlas])
    StorageEndpointFactory(site=site, url="root://se.example.org//data")

    assert matched("root://se.example.org//data/file", cms.pk) == (site, None)
    assert matched("root://se.example.org//data/file", atlas.pk)[1] is not None


def test_without_an_experiment_every_endpoint_is_a_candidate() -> None:
    cms = ExperimentFactory(name="CMS")
    endpoint = StorageEndpointFactory(url="root://se.example.org//data", experiments=[cms])

    assert matched("root://se.example.org//data/file")[1] == endpoint


def test_a_path_outside_the_doors_endpoints_gives_the_doors_site_and_its_only_endpoint() -> None:
    endpoint = StorageEndpointFactory(url="srm://se.example.org:8443/srm/managerv2")

    assert matched("davs://se.example.org:8443/pnfs/file") == (endpoint.site, endpoint)


def test_a_door_of_two_endpoints_off_their_paths_gives_the_site_alone() -> None:
    site = SiteFactory()
    StorageEndpointFactory(site=site, url="root://se.example.org//atlas")
    StorageEndpointFactory(site=site, url="root://se.example.org//cms")

    assert matched("root://se.example.org//lhcb/file") == (site, None)


def test_another_port_of_a_host_of_one_site_gives_that_site() -> None:
    endpoint = StorageEndpointFactory(url="davs://se.example.org/data")

    assert matched("gsiftp://se.example.org/data/file") == (endpoint.site, endpoint)


def test_a_host_that_sites_share_decides_nothing_on_an_unknown_port() -> None:
    StorageEndpointFactory(url="root://localhost:1094//a")
    StorageEndpointFactory(url="root://localhost:1095//b")

    assert matched("root://localhost:2000//a/file") == (None, None)


def test_an_unknown_host_matches_nothing() -> None:
    StorageEndpointFactory(url="root://se.example.org//data")

    assert matched("root://elsewhere.example.org//data/file") == (None, None)


def test_a_url_with_a_port_that_is_not_a_number_matches_nothing() -> None:
    StorageEndpointFactory(url="root://se.example.org//data")
    StorageEndpointFactory(url="file:///srv/site-a")  # the door of no host

    assert matched("root://se.example.org:x//data/file") == (None, None)


def test_an_rse_name_decides_before_the_url_in_any_case() -> None:
    StorageEndpointFactory(url="root://se.example.org//data")
    named = StorageEndpointFactory(url="davs://other.example.org/data", rse_names=["OTHER_DATADISK"])

    found = EndpointIndex.load().match("root://se.example.org//data/file", rse="other_datadisk")

    assert found == EndpointMatch(named.site_id, named.pk)


def test_the_index_is_read_with_the_experiments_in_one_query(django_assert_num_queries: object) -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    site = SiteFactory(experiments=[atlas, cms])
    for number in range(3):
        StorageEndpointFactory(url=f"root://se{number}.example.org//data", site=site, experiments=[atlas, cms])
    with django_assert_num_queries(1):  # type: ignore[operator]
        index = EndpointIndex.load(rows=True)
        found = [index.site(f"root://se{n}.example.org//data/f", experiment_id=cms.pk) for n in range(3)]

    assert found == [site] * 3


def test_a_door_written_with_and_without_its_default_port_is_one_sites_door() -> None:
    def site(name: str, url: str) -> dict[str, object]:
        return {"name": name, "tier": 2, "country": "IT", "endpoints": [{"url": url}]}

    document = {"sites": [site("A", "root://se.example.org//a"), site("B", "root://se.example.org:1094//b")]}
    with pytest.raises(SitesDocumentError) as caught:
        sites_import(document=document)

    assert caught.value.errors == [
        {
            "place": "sites[1].endpoints[0].url",
            "error": "this storage door is A's (sites[0].endpoints[0].url): a door has one site",
        }
    ]
