"""The challenge's FROM x TO matrix says where the portal's own runs behind a cell were measured: "measured at SITE
by its agent" for a site agent's runs, "measured by the portal's workers" for the others, both when a cell holds
both, and nothing for a cell of DDM systems' records only; the page, its CSV and its JSON say the same."""

from __future__ import annotations

import csv
import io
import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils.html import escape

from challenges.models import Activity, Challenge, Target
from results.matrix.measured import measured_label, runs_agent_sites, runs_measured_label
from results.models import TransferRecord
from results.services import records_store
from runs.models import Run
from sites.agents import agent_enroll
from sites.models import Experiment, Site
from sites.roles import membership_grant

pytestmark = pytest.mark.django_db

AGENT = "measured at CERN by its agent"
PORTAL = "measured by the portal's workers"
T0 = datetime(2022, 3, 14, tzinfo=UTC)
_ids = itertools.count()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def record(world: dict[str, Any], *, source: str = "cern", destination: str = "cnaf", start: float, end: float,
           run: Run | None = None) -> TransferRecord:  # fmt: skip
    """A 1 GB pull: the probe's record of `run` (counting for its activity, as the engine records it), else FTS's."""
    return TransferRecord(
        experiment=world["atlas"], source_site=world[source], destination_site=world[destination], bytes=10**9,
        start=at(start), end=at(end), state="ok", mode="pull", run=run, activity=run.activity if run else None,
        origin="probe" if run else "fts", origin_id=f"measured{next(_ids)}",
    )  # fmt: skip


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(get_user_model().objects.create_user("viewer"))
    return client


@pytest.fixture
def measured() -> dict[str, Any]:
    """An hour's challenge with an ATLAS activity whose targets are its links. CERN -> CNAF: a run of CERN's agent
    and a run of the portal's workers; CNAF -> KIT: a run of the portal's workers only; CERN -> KIT: FTS's records
    only."""
    atlas = Experiment.objects.create(name="ATLAS")
    world: dict[str, Any] = {"atlas": atlas}
    for name, country in (("CERN", "CH"), ("CNAF", "IT"), ("KIT", "DE")):
        world[name.lower()] = Site.objects.create(name=name, tier=1, country=country)
    challenge = Challenge.objects.create(name="TC", slug="tc", start=at(0), end=at(60))
    activity = Activity.objects.create(challenge=challenge, name="links", experiment=atlas, mode="T1-T1",
                                       kind="transfer", start=at(0), end=at(60))  # fmt: skip
    for source, destination in (("cern", "cnaf"), ("cnaf", "kit"), ("cern", "kit")):
        Target.objects.create(activity=activity, link_from=world[source], link_to=world[destination], rate=1e9)
    agent, _ = agent_enroll(site=world["cern"])
    by_agent = Run.objects.create(activity=activity, kind="transfer", state="finished", agent=agent)
    by_portal = Run.objects.create(activity=activity, kind="transfer", state="finished")
    on_kit = Run.objects.create(activity=activity, kind="transfer", state="finished")
    records_store(
        records=[
            record(world, start=1, end=2, run=by_agent),
            record(world, start=3, end=4, run=by_portal),
            record(world, source="cnaf", destination="kit", start=5, end=6, run=on_kit),
            record(world, source="cern", destination="kit", start=7, end=8),
        ]
    )
    return world | {"by_agent": by_agent, "by_portal": by_portal}


def test_one_label_for_each_way_of_measuring() -> None:
    assert measured_label(agents=["TB-T1-A"]) == "measured at TB-T1-A by its agent"
    assert measured_label(site_workers=["TB-T0"]) == "measured at TB-T0 by the portal's worker there"
    assert measured_label(portal=True) == PORTAL
    assert measured_label(agents=["B", "a", "B"], portal=True) == (
        "measured at a by its agent; measured at B by its agent; " + PORTAL
    )
    assert measured_label() is None


def test_a_run_is_its_agents_site_or_the_portals_workers(measured: dict[str, Any]) -> None:
    runs = [measured["by_agent"].pk, measured["by_portal"].pk]
    sites = runs_agent_sites(runs)
    assert sites == {measured["by_agent"].pk: "CERN"}
    assert runs_measured_label(runs, sites) == f"{AGENT}; {PORTAL}"
    assert runs_measured_label([measured["by_portal"].pk], sites) == PORTAL
    assert runs_measured_label([], sites) is None


@pytest.mark.parametrize("resolution", ["unions", "records"])
def test_the_matrix_page_csv_and_json_say_where_each_cell_was_measured(
    measured: dict[str, Any],
    viewer: Client,
    resolution: str,
) -> None:
    expected = {
        ("CERN", "CNAF"): f"{AGENT}; {PORTAL}",
        ("CNAF", "KIT"): PORTAL,
        ("CERN", "KIT"): None,  # FTS's records: not the portal's measurement
    }
    rows = viewer.get("/results/tc/matrix/", {"format": "json", "resolution": resolution}).json()["rows"]
    assert {(row["source"], row["destination"]): row["measured_by"] for row in rows} == expected
    lines = list(csv.DictReader(io.StringIO(viewer.get("/results/tc/matrix/", {"format": "csv"}).content.decode())))
    assert {(row["source"], row["destination"]): row["measured_by"] or None for row in lines} == expected
    page = viewer.get("/results/tc/matrix/", {"resolution": resolution}).content.decode()
    assert page.count(f'<small class="measured">{escape(f"{AGENT}; {PORTAL}")}</small>') == 1
    assert page.count(f'<small class="measured">{escape(PORTAL)}</small>') == 1


def test_the_runs_matrix_api_says_where_each_cell_was_measured(measured: dict[str, Any], client: Client) -> None:
    user = get_user_model().objects.create_user("coordinator")
    membership_grant(user=user, role="coordinator")
    client.force_login(user)
    both = f"{measured['by_agent'].pk},{measured['by_portal'].pk}"
    rows = client.get("/api/v1/runs/matrix/", {"runs": both}).json()["rows"]
    assert {(row["source"], row["destination"]): row["measured_by"] for row in rows} == {
        ("CERN", "CNAF"): f"{AGENT}; {PORTAL}"
    }
    one = client.get(f"/api/v1/runs/{measured['by_agent'].pk}/matrix/").json()["rows"]
    assert [row["measured_by"] for row in one] == [AGENT]
