"""The challenge's FROM x TO matrix says where the portal's own runs behind a cell were measured: "measured at SITE
by its agent" for a site agent's runs, "measured by the portal's workers" for the others, both when a cell holds
both, and nothing for a cell of DDM systems' records only; the page, its CSV and its JSON say the same."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from results.matrix.measured import measured_label, runs_agent_sites, runs_measured_label
from results.services import records_store
from runs.models import Run
from sites.agents import agent_enroll
from tests.results.test_matrix import activities, at, record, viewer, world  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

AGENT = "measured at CERN by its agent"
PORTAL = "measured by the portal's workers"


@pytest.fixture
def measured(world: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    """CERN -> CNAF: a run of CERN's agent and a run of the portal's workers; CNAF -> KIT: a run of the portal's
    workers only; CERN -> KIT: FTS's records only."""
    activities(world)
    agent, _ = agent_enroll(site=world["cern"])
    activity = world["challenge"].activities.get(experiment=world["atlas"])
    by_agent = Run.objects.create(activity=activity, kind="transfer", state="finished", agent=agent)
    by_portal = Run.objects.create(activity=activity, kind="transfer", state="finished")
    on_kit = Run.objects.create(activity=activity, kind="transfer", state="finished")
    rows = [record(world, start=1, end=2, size=10**9), record(world, start=3, end=4, size=10**9)]
    rows[0].run, rows[1].run = by_agent, by_portal
    kit = record(world, source="cnaf", destination="kit", start=5, end=6, size=10**9)
    kit.run = on_kit
    for probe in (*rows, kit):  # a run's records count for its activity, as the engine records them
        probe.activity = activity
    fts = record(world, source="cern", destination="kit", start=7, end=8, size=10**9)
    fts.origin = "fts"
    records_store(records=[*rows, kit, fts])
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
    viewer: Client,  # noqa: F811
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
