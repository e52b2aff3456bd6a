"""Which endpoints and sites a run's plan takes from the registry, by its one matcher (sites.matching): only
endpoints that serve the run's experiment, and URLs matched with their schemes' default ports."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from runs.parameters import run_plan
from runs.selectors import SiteNames
from tests.challenges.factories import ActivityFactory, TargetFactory
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory

pytestmark = pytest.mark.django_db


def test_an_activity_run_passes_over_a_source_endpoint_that_does_not_serve_its_experiment() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    source, destination = SiteFactory(experiments=[atlas, cms]), SiteFactory(experiments=[atlas])
    StorageEndpointFactory(site=source, url="root://a-cms.example.org//cms", experiments=[cms])
    StorageEndpointFactory(site=source, url="root://b-all.example.org//data")
    StorageEndpointFactory(site=destination, url="root://dest.example.org//data")
    activity = ActivityFactory(experiment=atlas, source=source, file_size=1000, file_count=2, concurrency=1)
    TargetFactory(activity=activity, site=destination)

    plan = run_plan("transfer", activity, {})

    assert plan.parameters["source"] == "root://b-all.example.org//data"


def test_an_activity_run_says_which_experiment_no_source_endpoint_serves() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    source, destination = SiteFactory(name="SRC", experiments=[atlas, cms]), SiteFactory(experiments=[atlas])
    StorageEndpointFactory(site=source, url="root://a-cms.example.org//cms", experiments=[cms])
    StorageEndpointFactory(site=destination, url="root://dest.example.org//data")
    activity = ActivityFactory(experiment=atlas, source=source, file_size=1000, file_count=2, concurrency=1)
    TargetFactory(activity=activity, site=destination)

    with pytest.raises(ValidationError) as caught:
        run_plan("transfer", activity, {})

    assert caught.value.message_dict["source"][0] == (
        "the source site SRC has no disk endpoint serving ATLAS the workers can speak"
    )


def test_an_ad_hoc_run_finds_its_site_from_a_source_url_without_the_default_port() -> None:
    site = SiteFactory(name="TB-A")
    StorageEndpointFactory(site=site, url="root://se.example.org:1094//data")
    given = {
        "source": "root://se.example.org//data",
        "destinations": ["root://se2.example.org//d"],
        "file_size": 1,
        "file_count": 1,
    }

    plan = run_plan("transfer", None, given)

    assert plan.site == site


def test_a_run_list_names_the_site_of_a_url_written_with_its_default_port() -> None:
    StorageEndpointFactory(site=SiteFactory(name="TB-A"), url="root://se.example.org//data")

    assert SiteNames().of_url("root://SE.example.org:1094//data/file") == "TB-A"


def test_a_streamed_run_from_a_root_only_source_writes_to_the_destinations_http_door() -> None:
    atlas = ExperimentFactory(name="ATLAS")
    origin, destination = SiteFactory(experiments=[atlas]), SiteFactory(experiments=[atlas])
    StorageEndpointFactory(site=origin, url="root://origin.example.org//data")
    StorageEndpointFactory(site=destination, url="root://dest.example.org//data")
    StorageEndpointFactory(site=destination, url="davs://dest.example.org:8443/data")
    activity = ActivityFactory(
        experiment=atlas, source=origin, file_size=1000, file_count=2, concurrency=1, copy_mode="streamed"
    )
    TargetFactory(activity=activity, link_from=origin, link_to=destination, site=None, direction="")

    plan = run_plan("transfer", activity, {})

    assert plan.parameters["destinations"] == ["davs://dest.example.org:8443/data"]
