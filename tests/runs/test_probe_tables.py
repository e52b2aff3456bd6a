"""A challenge's probes, one table per kind with exports and the comparison with an earlier challenge; and the
Plotly figures of a probe on its run page."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from challenges.models import Challenge
from runs.models import Run
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.sites.factories import ExperimentFactory, UserFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 5, tzinfo=UTC)


def interval(end: float, gbits: float) -> dict[str, Any]:
    return {"summary": {"start": end - 1, "end": end, "throughput-bits": gbits * 1e9}}


def network_summary(gbits: list[float], *, path_mtu: int = 9000) -> dict[str, Any]:
    return {
        "rate": sum(gbits) / len(gbits) * 1e9 / 8,
        "path_mtu": path_mtu,
        "local_mtu": 9000,
        "pscheduler": {
            "intervals": [interval(n + 1, value) for n, value in enumerate(gbits)],
            "summary": {"summary": {"retransmits": 3}},
        },
    }


def plan(slug: str, *, compare_with: Challenge | None = None) -> dict[str, Any]:
    challenge = ChallengeFactory(slug=slug, name=slug.upper(), start=T0, compare_with=compare_with)
    atlas = ExperimentFactory()
    made = {}
    for kind in ("network", "io", "cache", "staging"):
        activity = ActivityFactory(challenge=challenge, experiment=atlas, kind=kind, name=f"{slug} {kind}")
        made[kind] = activity
    return {"challenge": challenge, **made}


def probe_run(activity: Any, kind: str, summary: dict[str, Any], host: str = "t1a.example.org") -> Run:
    return Run.objects.create(
        activity=activity,
        kind=kind,
        state="finished",
        parameters={"host": host} if kind == "network" else {"endpoint": f"root://{host}:1094//data"},
        summary=summary,
        started_at=T0 + timedelta(hours=1),
    )


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(UserFactory(username="viewer"))
    return client


def test_each_probe_kind_has_its_table_its_exports_and_the_comparison(viewer: Client) -> None:
    earlier = plan("dc22")
    now = plan("dc24", compare_with=earlier["challenge"])
    probe_run(earlier["network"], "network", network_summary([2, 2]))
    probe_run(now["network"], "network", network_summary([4, 0, 4], path_mtu=1500))
    probe_run(now["io"], "io", {"write_rate": 2e8, "read_rate": 5e8, "size": 10**9})
    cache_rows = [
        {"url": "root://c//f1", "size": 10**9, "direct_rate": 1e8, "empty_cache_rate": 8e7, "filled_cache_rate": 4e8,
         "speedup": 4.0},
    ]  # fmt: skip
    probe_run(now["cache"], "cache", {"rows": cache_rows})
    files = [
        {"source_url": "root://t//a", "ok": True, "end": "2026-01-05T01:00:12+00:00",
         "details": {"queue_seconds": 3.0, "stage_seconds": 9.0}},
        {"source_url": "root://t//b", "ok": True, "end": "2026-01-05T01:00:20+00:00",
         "details": {"queue_seconds": 5.0, "stage_seconds": 15.0}},
    ]  # fmt: skip
    staging = {"start": "2026-01-05T01:00:00+00:00", "seconds": 20.0, "staged": 2, "failed": 0, "files": files}
    probe_run(now["staging"], "staging", staging)

    page = viewer.get("/challenges/dc24/probes/").content.decode()
    assert 'id="probes-network"' in page and "≠ local 9000" in page  # the MTU mismatch flagged
    assert "4 Gb/s / 4 Gb/s / 4 Gb/s" in page  # min / avg / max over the intervals that moved data
    assert "<td>200 MB/s</td><td>500 MB/s</td>" in page
    assert "4.00\u00d7" in page  # the cache's speed-up: 4.00 times
    assert "2 / 0 of 2" in page and "12.0 s" in page and "360" in page  # files per hour
    assert "Compared with DC22" in page

    rows = viewer.get("/challenges/dc24/probes/", {"table": "network", "format": "json"}).json()["rows"]
    assert [(r["rate"], r["interval_average"], r["mtu_mismatch"], r["retransmits"]) for r in rows] == [
        (pytest.approx(8 / 3 * 1e9 / 8), pytest.approx(4e9 / 8), True, 3)
    ]
    staging_csv = viewer.get("/challenges/dc24/probes/", {"table": "staging", "format": "csv"}).content.decode()
    [row] = list(csv.DictReader(io.StringIO(staging_csv)))
    assert (row["time_to_first_file"], row["median_queue_seconds"], row["median_stage_seconds"]) == (
        "12.0",
        "4.0",
        "12.0",
    )
    compared = viewer.get("/challenges/dc24/probes/", {"table": "compare", "format": "json"}).json()["rows"]
    network = next(entry for entry in compared if entry["kind"] == "network")
    assert network["target"] == "t1a.example.org"
    assert network["ratio"] == pytest.approx((8 / 3) / 2)
    bad = viewer.get("/challenges/dc24/probes/", {"table": "nope", "format": "csv"})
    assert bad.status_code == 400 and b"table must be one of" in bad.content


def test_a_probes_run_page_draws_its_figures(viewer: Client) -> None:
    made = plan("dc24")
    run = probe_run(made["network"], "network", network_summary([2, 0, 4]))
    page = viewer.get(f"/challenges/runs/{run.pk}/").content.decode()
    figures = json.loads(page.split('id="probe-figures-data" type="application/json">')[1].split("</script>")[0])
    line, histogram = figures
    assert line["data"][0]["y"] == [2.0, 0.0, 4.0]  # Gb/s per interval, the idle one too
    assert histogram["data"][0]["x"] == [2.0, 4.0]  # the histogram: intervals that moved data only
    assert "min 2 Gb/s · avg 3 Gb/s · max 4 Gb/s · stdev 1.41 Gb/s" in histogram["layout"]["title"]["text"]


def _queries(client: Client, url: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_probes_page_takes_as_many_queries_for_many_runs_as_for_one(viewer: Client) -> None:
    earlier = plan("dc22")
    now = plan("dc24", compare_with=earlier["challenge"])
    staging = {"start": "2026-01-05T01:00:00+00:00", "seconds": 1.0, "staged": 1, "failed": 0, "files": []}

    def recall(index: int) -> None:
        Run.objects.create(
            activity=now["staging"], kind="staging", state="finished", summary=staging,
            parameters={"urls": [f"davs://tape{index}.example.org:443/data/f"]},
        )  # fmt: skip

    probe_run(now["network"], "network", network_summary([2, 2]))
    recall(0)
    few = _queries(viewer, "/challenges/dc24/probes/")
    for index in range(10):
        probe_run(now["network"], "network", network_summary([index + 1.0]), host=f"h{index}")
        probe_run(earlier["io"], "io", {"write_rate": 1e8, "read_rate": 2e8, "size": 10**9})
        recall(index + 1)  # each recall's site drives: the registry read once, not per run
    assert _queries(viewer, "/challenges/dc24/probes/") == few
    assert _queries(viewer, "/results/about/numbers/") <= 3  # session, user (and nothing that grows)


def test_a_recall_faster_than_the_drives_is_flagged_as_not_a_tape_rate(viewer: Client) -> None:
    from sites.models import Capacity
    from tests.sites.factories import SiteFactory, StorageEndpointFactory

    made = plan("dc24")
    tape_site = SiteFactory(name="TB-TAPE")
    StorageEndpointFactory(site=tape_site, url="root://tape.example.org:1094//data", kind="tape")
    Capacity.objects.create(site=tape_site, tape_drives=1, tape_drive_rate=20e6)
    summary = {
        "start": "2026-01-05T01:00:00+00:00", "seconds": 1.0, "staged": 8, "failed": 0, "files": [],
        "files_from_tape": 2, "files_already_online": 6, "files_locality_unknown": 0, "tape_rate": 480e6,
    }  # fmt: skip
    run = Run.objects.create(
        activity=made["staging"], kind="staging", state="finished", summary=summary,
        parameters={"urls": [f"root://tape.example.org:1094//data/run-1/f{n}" for n in range(8)]},
    )  # fmt: skip
    page = viewer.get(f"/challenges/runs/{run.pk}/").content.decode()
    assert 'id="not-a-tape-rate"' in page and "20 MB/s" in page
    assert "6 files were on disk before the recall: not counted as a tape rate" in page
    rows = viewer.get("/challenges/dc24/probes/", {"table": "staging", "format": "json"}).json()["rows"]
    assert [(r["files_from_tape"], r["tape_limit"], r["faster_than_drives"]) for r in rows] == [(2, 20e6, True)]
    summary["tape_rate"] = 15e6  # slower than the drive: a tape rate
    Run.objects.filter(pk=run.pk).update(summary=summary)
    assert 'id="not-a-tape-rate"' not in viewer.get(f"/challenges/runs/{run.pk}/").content.decode()


def test_the_tape_table_sets_dt_and_a_dt_side_by_side_against_their_targets(viewer: Client) -> None:
    from challenges.models import Activity
    from results.models import TransferRecord
    from results.services import records_store
    from sites.models import Capacity
    from tests.sites.factories import SiteFactory, StorageEndpointFactory

    challenge = ChallengeFactory(slug="tc22", name="TC22", start=T0)
    atlas = ExperimentFactory(name="ATLAS")
    source, tape_site = SiteFactory(name="T0"), SiteFactory(name="TAPE")
    StorageEndpointFactory(site=tape_site, url="davs://tape.example.org:443/data", kind="tape")
    Capacity.objects.create(site=tape_site, tape_drives=2, tape_drive_rate=50e6, staging_request_limit=5000)
    dt = ActivityFactory(challenge=challenge, experiment=atlas, kind="tape-write", name="ATLAS DT", mode="DT")
    adt = ActivityFactory(challenge=challenge, experiment=atlas, kind="staging", name="ATLAS A-DT", mode="A-DT")
    dt.targets.create(site=tape_site, direction="in", rate=100e6)
    adt.targets.create(site=tape_site, direction="out", rate=50e6)
    write = Run.objects.create(activity=dt, kind="tape-write", state="finished", started_at=T0)
    records_store(
        records=[
            TransferRecord(
                experiment=atlas, source_site=source, destination_site=tape_site, bytes=100 * 10**6, state="ok",
                start=T0 + timedelta(seconds=10 * n), end=T0 + timedelta(seconds=10 * n + 10), origin="probe",
                origin_id=f"dt-{n}", run=write, activity=dt,
            )
            for n in range(4)
        ]
    )  # fmt: skip
    summary = {
        "start": "2026-01-05T02:00:00+00:00", "seconds": 40.0, "staged": 4, "failed": 0,
        "requests": [{"files": 4}], "files": [], "files_from_tape": 4, "files_already_online": 0, "tape_rate": 40e6,
    }  # fmt: skip
    Run.objects.create(
        activity=adt, kind="staging", state="finished", summary=summary, started_at=T0 + timedelta(hours=2),
        parameters={"urls": [f"davs://tape.example.org:443/data/run/f{n}" for n in range(4)]},
    )  # fmt: skip
    rows = viewer.get("/challenges/tc22/probes/", {"table": "tape", "format": "json"}).json()["rows"]
    assert [(r["mode"], r["site"], r["target_rate"], r["achieved_rate"]) for r in rows] == [
        ("DT", "TAPE", 100e6, pytest.approx(10e6)),  # 400 MB over its 40 s active window
        ("A-DT", "TAPE", 50e6, 40e6),
    ]
    assert rows[1]["achieved_of_target"] == pytest.approx(0.8)
    assert (rows[1]["largest_request"], rows[1]["site_request_limit"], rows[1]["faster_than_drives"]) == (
        4,
        5000,
        False,
    )
    page = viewer.get("/challenges/tc22/probes/").content.decode()
    assert 'id="probes-tape"' in page and "4 / 0" in page
    assert Activity.objects.count() == 2


def test_the_probes_page_shows_when_a_run_started_to_the_second_and_the_export_in_full(viewer: Client) -> None:
    made = plan("dc24")
    run = probe_run(made["io"], "io", {"write_rate": 2e8, "read_rate": 5e8, "size": 10**9})
    Run.objects.filter(pk=run.pk).update(started_at=T0 + timedelta(hours=1, microseconds=123456))
    page = viewer.get("/challenges/dc24/probes/").content.decode()
    started = f"{T0 + timedelta(hours=1):%Y-%m-%d %H:%M:%S}"
    assert f"<td>{started}</td>" in page
    assert "123456" not in page
    rows = viewer.get("/challenges/dc24/probes/", {"table": "io", "format": "json"}).json()["rows"]
    assert rows[0]["started_at"] == f"{T0 + timedelta(hours=1):%Y-%m-%dT%H:%M:%S}.123456Z"


def test_a_network_runs_histogram_of_one_interval_with_data_is_one_bin_centred_on_it() -> None:
    from runs.probes.tables import network_figures

    _, histogram = network_figures({"intervals": [(1.0, 9.4e9 / 8), (2.0, 0.0)]})
    assert histogram["data"][0]["x"] == [pytest.approx(9.4)]
    bins = histogram["data"][0]["xbins"]
    assert (bins["start"], bins["end"]) == (pytest.approx(8.93), pytest.approx(9.87))
    assert histogram["layout"]["xaxis"]["range"] == [0, pytest.approx(18.8)]
    assert "nbinsx" not in histogram["data"][0]
