"""A sweep over three sites of the namespaced testbed, measured from inside each site by its own worker, finds what
the JUNO challenge found: from TB-T1-B (MTU 1500) a path MTU of 1500 that reaches the far end, from the 9000 side a
path MTU of 9000 whose packets never get there, and which end has the smaller MTU; 9000 between 9000 sites; and the
1 Gb/s link between TB-T0 and TB-T1-A read by iperf3 as at most that."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from sweeps.models import Sweep
from testbed.grid import Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

MB = 1024 * 1024


def sweep_ended(sweep_id: int, timeout: float) -> Sweep:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sweep = Sweep.objects.get(pk=sweep_id)
        if sweep.state in ("finished", "cancelled", "failed"):
            return sweep
        time.sleep(1)
    steps = list(Sweep.objects.get(pk=sweep_id).steps.values_list("index", "state", "queue", "run__state"))
    raise AssertionError(f"sweep {sweep_id} did not end in {timeout} s: {steps}")


def test_a_sweep_from_inside_the_sites_finds_the_mtu_mismatch_and_the_capped_link(
    netns_testbed: Testbed, site_workers: list[str], worker: Path, coordinator: Any
) -> None:
    api = APIClient()
    api.force_authenticate(coordinator)
    body = {
        "name": "MTU",
        "sites": site_workers,
        "modes": ["pull"],
        "concurrency": [1],
        "protocol": "root",
        "file_size": MB,
        "network_duration": 3,
    }
    response = api.post("/api/v1/sweeps/", body, format="json")
    assert response.status_code == 201, response.content
    sweep = sweep_ended(response.json()["id"], 420)
    assert sweep.state == "finished", sweep.message
    matrix = api.get(f"/api/v1/sweeps/{sweep.pk}/matrix/").json()

    network = {(row["source"], row["destination"]): row for row in matrix["network"]}
    for (source, destination), row in sorted(network.items()):
        print(
            f"{source} -> {destination}: path MTU {row['path_mtu']} reached {row['reached']}, local {row['local_mtu']}"
            f" far {row['far_mtu']}, smaller at {row['smaller_mtu_at']}, iperf3 {row['iperf3_bps'] / 1e9:.3f} Gb/s"
        )
    assert len(network) == 6
    for (source, _), row in network.items():
        assert row["measured_from"] == source and row["error"] == "", row  # each from inside its own site
    from_1500 = network[("TB-T1-B", "TB-T0")]
    assert (from_1500["local_mtu"], from_1500["path_mtu"], from_1500["reached"]) == (1500, 1500, True)
    from_9000 = network[("TB-T0", "TB-T1-B")]
    assert (from_9000["local_mtu"], from_9000["path_mtu"], from_9000["reached"]) == (9000, 9000, False)
    for row in (from_1500, from_9000, network[("TB-T1-A", "TB-T1-B")], network[("TB-T1-B", "TB-T1-A")]):
        assert row["mtu_mismatch"] is True and row["smaller_mtu_at"] == "TB-T1-B", row
    for link in (("TB-T0", "TB-T1-A"), ("TB-T1-A", "TB-T0")):
        row = network[link]
        assert (row["path_mtu"], row["reached"], row["mtu_mismatch"], row["smaller_mtu_at"]) == (
            9000,
            True,
            False,
            None,
        )
    capped = network[("TB-T1-A", "TB-T0")]["iperf3_bps"]
    assert 0.3e9 < capped <= 1e9, capped

    transfers = matrix["rows"]
    assert len(transfers) == 6
    for row in transfers:  # TCP gets through the mismatch: every copy works, each run from its source's site
        assert (row["files_ok"], row["files_failed"], row["measured_from"]) == (1, 0, row["source"]), row

    browser = Client()
    browser.force_login(coordinator)
    html = browser.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "smaller MTU at TB-T1-B" in html and "not reached" in html
