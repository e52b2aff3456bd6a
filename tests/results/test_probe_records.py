"""The records of a portal run's files (results.services.probe_record_new): their sites and endpoints matched from
the URLs by the registry's one matcher (sites.matching), as an ingested record's are."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from results.models import TransferRecord
from results.services import probe_record_new
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 14, 10, 0, tzinfo=UTC)


@dataclass
class Outcome:
    source_url: str
    destination_url: str
    bytes: int = 1000
    start: datetime = T0
    end: datetime = T0 + timedelta(seconds=10)
    ok: bool = True
    error: str = ""
    mode: str = "pull"


def record(outcome: Outcome, experiment_id: int | None = None) -> TransferRecord:
    return probe_record_new(
        run_id=1,
        activity_id=None,
        experiment_id=experiment_id,
        outcome=outcome,
        state="ok",
        concurrency=1,
        origin_id="run-1-file-0",
        attempt=1,
    )


def test_a_file_url_without_the_default_port_finds_the_endpoint_that_writes_it() -> None:
    source = StorageEndpointFactory(url="root://se.example.org:1094//data")
    destination = StorageEndpointFactory(url="davs://dest.example.org/data")

    made = record(Outcome("root://se.example.org//data/f", "davs://dest.example.org:443/data/portal-runs/1/f"))

    assert (made.source_endpoint, made.source_site) == (source, source.site)
    assert (made.destination_endpoint, made.destination_site) == (destination, destination.site)


def test_a_file_is_not_given_an_endpoint_that_does_not_serve_the_runs_experiment() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    site = SiteFactory(experiments=[atlas, cms])
    StorageEndpointFactory(site=site, url="root://se.example.org//data")
    StorageEndpointFactory(site=site, url="root://se.example.org//data/cms", experiments=[cms])

    made = record(Outcome("root://se.example.org//data/cms/f", "root://se.example.org//data/f2"), atlas.pk)

    assert made.source_endpoint.url == "root://se.example.org//data"  # type: ignore[union-attr]
    assert made.source_site == site
