"""A challenge's runs list names each run's link by its sites (the URLs on hover, and in a column of the exports):
a transfer's source and destinations, a probe's iperf3 host, io endpoint or tape."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from challenges.models import Activity
from runs.models import Run
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.sites.factories import NetworkHostFactory, SiteFactory, StorageEndpointFactory, UserFactory

pytestmark = pytest.mark.django_db

SOURCE = "root://src.example.org:1094//data"
DESTINATION = "davs://dst.example.org:443/data"
UNREGISTERED = "root://elsewhere.example.org:1094//data"


@pytest.fixture
def activity() -> Activity:
    source, destination, tape = SiteFactory(name="SRC"), SiteFactory(name="DST"), SiteFactory(name="TAPE")
    StorageEndpointFactory(site=source, url=SOURCE)
    StorageEndpointFactory(site=destination, url=DESTINATION)
    StorageEndpointFactory(site=tape, url="root://tape.example.org:1094//tape", kind="tape")
    NetworkHostFactory(site=destination, address="perf.dst.example.org:5201")
    return ActivityFactory(challenge=ChallengeFactory(slug="dc"), name="export")


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(UserFactory(username="viewer"))
    return client


def row_of(page: str, run: Run) -> str:
    return page.split(f'<tr id="run-{run.pk}">')[1].split("</tr>", maxsplit=1)[0]


def test_a_transfer_is_listed_by_its_sites_with_its_urls_on_hover(viewer: Client, activity: Activity) -> None:
    run = Run.objects.create(
        activity=activity,
        kind="transfer",
        parameters={"site": "SRC", "source": SOURCE, "destinations": [DESTINATION, f"{DESTINATION}/b", UNREGISTERED]},
    )
    row = row_of(viewer.get("/challenges/dc/runs/").content.decode(), run)
    urls = f"{SOURCE} -&gt; {DESTINATION}, {DESTINATION}/b, {UNREGISTERED}"
    assert f'title="{urls}">SRC -&gt; DST, elsewhere.example.org</td>' in row
    assert f">{SOURCE}" not in row


def test_probes_are_listed_by_the_site_of_what_they_measured(viewer: Client, activity: Activity) -> None:
    network = Run.objects.create(
        activity=activity, kind="network", parameters={"site": "SRC", "host": "perf.dst.example.org", "port": 5201}
    )
    io = Run.objects.create(activity=activity, kind="io", parameters={"endpoint": f"{DESTINATION}/io"})
    staging = Run.objects.create(
        activity=activity,
        kind="staging",
        parameters={
            "urls": ["root://tape.example.org:1094//tape/run-1/f0", "root://tape.example.org:1094//tape/run-1/f1"]
        },
    )
    page = viewer.get("/challenges/dc/runs/").content.decode()
    assert 'title="iperf3 perf.dst.example.org:5201">SRC -&gt; DST</td>' in row_of(page, network)
    assert f'title="{DESTINATION}/io">DST</td>' in row_of(page, io)
    assert 'title="2 files under root://tape.example.org:1094//tape/run-1/">TAPE</td>' in row_of(page, staging)


def test_the_exports_give_the_names_and_the_urls(viewer: Client, activity: Activity) -> None:
    Run.objects.create(
        activity=activity, kind="transfer", parameters={"site": "SRC", "source": SOURCE, "destinations": [DESTINATION]}
    )
    [row] = viewer.get("/challenges/dc/runs/", {"format": "json"}).json()["rows"]
    assert (row["link"], row["link_urls"]) == ("SRC -> DST", f"{SOURCE} -> {DESTINATION}")
    header = viewer.get("/challenges/dc/runs/", {"format": "csv"}).content.decode().splitlines()[0]
    assert ",link,link_urls," in header


def test_the_list_reads_the_registry_once_for_all_its_runs(
    viewer: Client, activity: Activity, django_assert_max_num_queries: Any
) -> None:
    for _ in range(20):
        Run.objects.create(
            activity=activity, kind="transfer", parameters={"source": SOURCE, "destinations": [DESTINATION]}
        )
    with django_assert_max_num_queries(8):
        page = viewer.get("/challenges/dc/runs/").content.decode()
    assert page.count("SRC -&gt; DST</td>") == 20
