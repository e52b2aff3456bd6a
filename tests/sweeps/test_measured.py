"""A sweep's tables say where each step was measured, in the words of the challenge matrix
(results.matrix.measured): at its source by that site's agent, at its source by the portal's worker there, or by the
portal's workers; every surface of a step (its row, its cell on the page, the CSV and JSON exports, the API's matrix
and steps) says the same."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.utils import timezone
from django.utils.html import escape
from rest_framework.test import APIClient

from runs import dispatch
from runs.models import Run
from sites.agents import agent_enroll
from sites.roles import membership_grant
from sweeps import services
from sweeps.models import Sweep
from sweeps.services import sweep_advance, sweep_start
from sweeps.tables import matrix_rows, network_rows
from tests.sites.factories import NetworkHostFactory, SiteFactory, StorageEndpointFactory, UserFactory

pytestmark = pytest.mark.django_db

EXPECTED = {
    "A": "measured at A by the portal's worker there",  # a worker serves site.A (no_workers)
    "B": "measured at B by its agent",
    "C": "measured by the portal's workers",  # neither: the default queue
}


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coord")
    membership_grant(user=user, role="coordinator")
    return user


@pytest.fixture
def swept(monkeypatch: pytest.MonkeyPatch, coordinator: Any) -> Sweep:
    """A sweep over sites A, B and C (a worker serves site A's queue, B has an agent, C neither) run to its end one
    step at a time with no worker (what would be sent is dropped), each step's run ended as its worker or agent would
    end it; B's agent ran B's steps (as its claim records on the run)."""
    monkeypatch.setattr(dispatch, "prepare_send", lambda *args, **kwargs: None)
    monkeypatch.setattr(dispatch, "served_queues", lambda: {"site.A"})
    monkeypatch.setattr(services, "advance_send", lambda *args: None)
    for number, name in enumerate(("A", "B", "C")):
        site: Any = SiteFactory(name=name)
        StorageEndpointFactory(site=site, url=f"davs://{name.lower()}.example.org:1094/data", kind="disk")
        NetworkHostFactory(site=site, address=f"ps.{name.lower()}.example.org:{5201 + number}")
        if name == "B":
            agent, _ = agent_enroll(site=site)
    data = {"name": "s", "sites": ["A", "B", "C"], "modes": ["pull"], "concurrency": [2]}
    sweep = sweep_start(user=coordinator, data=data)
    for _ in range(sweep.steps.count() + 1):
        sweep_advance(sweep.pk)
        current = sweep.steps.filter(state="running").select_related("source").first()
        if current is None or current.run_id is None:
            break
        agent_id = agent.pk if current.source.name == "B" else None
        Run.objects.filter(pk=current.run_id).update(
            state="finished", finished_at=timezone.now(), copies="deleted", agent_id=agent_id
        )
    sweep.refresh_from_db()
    assert sweep.state == "finished" and not sweep.steps.exclude(state="ended").exists()
    return sweep


def test_every_row_says_where_its_step_was_measured(swept: Sweep) -> None:
    rows = [*matrix_rows(swept), *network_rows(swept)]
    assert len(rows) == 12  # 6 links, each a transfer and a network step
    assert {row["measured_by"] for row in rows} == set(EXPECTED.values())
    for row in rows:
        assert row["measured_by"] == EXPECTED[row["source"]], row


def test_the_page_the_exports_and_the_api_say_the_same(swept: Sweep, coordinator: Any, client: Any) -> None:
    client.force_login(coordinator)
    html = client.get(f"/sweeps/{swept.pk}/").content.decode()
    for label in EXPECTED.values():
        # each step's label: in its functional, throughput and network cell and in the steps table
        assert html.count(f'<small class="measured">{escape(label)}</small>') == 3 * 2, label
        assert html.count(f"<td>{escape(label)}</td>") == 4, label
    for table in ("throughput", "network", "functional", "steps"):
        exported = client.get(f"/sweeps/{swept.pk}/", {"table": table, "format": "csv"}).content.decode()
        lines = list(csv.DictReader(io.StringIO(exported)))
        assert lines and all(line["measured_by"] == EXPECTED[line["source"]] for line in lines), table
        as_json = client.get(f"/sweeps/{swept.pk}/", {"table": table, "format": "json"}).json()["rows"]
        assert all(row["measured_by"] == EXPECTED[row["source"]] for row in as_json), table
    api = APIClient()
    api.force_authenticate(coordinator)
    matrix = api.get(f"/api/v1/sweeps/{swept.pk}/matrix/").json()
    assert all(row["measured_by"] == EXPECTED[row["source"]] for row in [*matrix["rows"], *matrix["network"]])
    steps = api.get(f"/api/v1/sweeps/{swept.pk}/").json()["steps"]
    assert len(steps) == 12 and all(step["measured_by"] == EXPECTED[step["source"]] for step in steps)
