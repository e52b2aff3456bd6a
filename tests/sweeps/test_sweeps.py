"""Sweeps without workers: what a sweep is asked (every problem at once, nothing created), the disk check with its
numbers, the steps one at a time (a step waits for its run's end and its copies' clean-up), a refused step, cancel,
the queue of each step (its source's), the advance sent by a step's run's end (runs.ends) and by its copies'
clean-up, and who reads which sweep."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from measure.context import ProbeContext
from results.models import TransferRecord
from runs import dispatch
from runs.copies import run_copies_deleted
from runs.ends import run_end
from runs.models import Run
from runs.reaper import runs_reap
from sites.roles import membership_grant
from sweeps import services
from sweeps.grids import compare_rows
from sweeps.models import Sweep, SweepStep
from sweeps.plan import sweep_plan
from sweeps.services import sweep_advance, sweep_cancel, sweep_start, sweeps_advance
from sweeps.tables import matrix_rows, network_rows, short_error, sweep_progress
from tests.challenges.factories import ActivityFactory
from tests.sites.factories import (
    ExperimentFactory,
    NetworkHostFactory,
    SiteFactory,
    StorageEndpointFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

GB = 10**9


class FiftyGigabytesFree(ProbeContext):
    """A deployment whose every endpoint reports 50 GB free."""

    def free_space(self, url: str) -> int | None:
        return 50 * GB


@pytest.fixture(autouse=True)
def no_workers(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The tasks the sweep and its runs would send, recorded instead (these tests have no worker); a worker serves
    site A's queue."""
    sent: dict[str, list[Any]] = {"prepare": [], "advance": [], "copies": []}
    monkeypatch.setattr(dispatch, "prepare_send", lambda run_id, queue, **_: sent["prepare"].append((run_id, queue)))
    monkeypatch.setattr(dispatch, "copies_delete_send", lambda *args: sent["copies"].append(args))
    monkeypatch.setattr(dispatch, "served_queues", lambda: {"site.A"})
    monkeypatch.setattr(services, "advance_send", sent["advance"].append)
    return sent


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coord")
    membership_grant(user=user, role="coordinator")
    return user


@pytest.fixture
def sites() -> list[Any]:
    made = []
    for number, name in enumerate(("A", "B", "C")):
        site = SiteFactory(name=name)
        StorageEndpointFactory(site=site, url=f"davs://{name.lower()}.example.org:1094/data", kind="disk")
        StorageEndpointFactory(site=site, url=f"root://{name.lower()}.example.org:1095//data", kind="disk")
        NetworkHostFactory(site=site, address=f"ps.{name.lower()}.example.org:{5201 + number}")
        made.append(site)
    return made


def body(**fields: Any) -> dict[str, Any]:
    return {"name": "s", "sites": ["A", "B", "C"], "modes": ["pull", "push"], "concurrency": [2], **fields}


def test_the_steps_of_a_sweep_network_first_then_each_mode_and_concurrency(sites: list[Any]) -> None:
    plan = sweep_plan(body(concurrency=[10, 2], file_count=3))
    kinds = [(s.kind, s.source.name, s.destination.name, s.mode, s.concurrency) for s in plan.steps]
    assert len(kinds) == 6 + 2 * 2 * 6
    assert [k[0] for k in kinds[:6]] == ["network"] * 6
    assert kinds[6] == ("transfer", "A", "B", "pull", 2) and kinds[-1] == ("transfer", "C", "B", "push", 10)
    assert plan.steps[0].parameters == {"host": "ps.b.example.org", "port": 5202, "duration": 10}
    transfer = plan.steps[6].parameters
    assert transfer["source"] == "davs://a.example.org:1094/data" and transfer["file_count"] == 3
    assert transfer["copy_mode"] == "pull" and transfer["checksum"] == "ADLER32"
    root = sweep_plan(body(modes=["pull"], protocol="root", network=False))
    assert {s.parameters["copy_mode"] for s in root.steps} == {"native"}
    assert root.steps[0].parameters["source"].startswith("root://")


def test_every_problem_of_a_sweep_at_once_and_nothing_made(sites: list[Any], coordinator: Any) -> None:
    NetworkHostFactory._meta.model.objects.filter(site__name="C").delete()
    with pytest.raises(ValidationError) as caught:
        sweep_start(
            user=coordinator,
            data=body(sites=["A", "C", "NOWHERE"], modes=["push", "sideways"], concurrency=[0], colour="red"),
        )
    errors = caught.value.message_dict
    assert "no site named 'NOWHERE'" in errors["sites"]
    assert any("modes must be" in message for message in errors["modes"])
    assert any("concurrency must be" in message for message in errors["concurrency"])
    assert any("unknown field 'colour'" in message for message in errors["non_field_errors"])
    assert any("C has no network host" in message for message in errors["network"])
    with pytest.raises(ValidationError) as caught:
        sweep_start(user=coordinator, data=body(file_count=0, network=False))
    assert caught.value.message_dict == {"file_count": ["file_count must be from 1 to 100000, not 0"]}
    with pytest.raises(ValidationError) as caught:
        sweep_start(user=coordinator, data=body(modes=["push"], protocol="root", links=[]))
    errors = caught.value.message_dict
    assert any("destination pulls" in message for message in errors["modes"])
    assert any('give "sites"' in message for message in errors["sites"])
    assert not Sweep.objects.exists() and not Run.objects.exists()


def test_the_api_refuses_with_messages_by_field(sites: list[Any], coordinator: Any) -> None:
    client = APIClient()
    client.force_authenticate(coordinator)
    response = client.post("/api/v1/sweeps/", {**body(), "sites": ["A", "Z"]}, format="json")
    assert response.status_code == 400 and response.json() == {"sites": ["no site named 'Z'"]}
    response = client.post("/api/v1/sweeps/", {**body(), "concurrency": ["many"]}, format="json")
    assert response.status_code == 400 and "concurrency" in response.json()
    response = client.post("/api/v1/sweeps/", {**body(), "file_sizes": 5}, format="json")  # a typo, not a default
    assert response.status_code == 400 and "unknown field 'file_sizes'" in response.json()["non_field_errors"][0]
    assert not Sweep.objects.exists()
    made = sweep_start(user=coordinator, data=body())
    assert [s["id"] for s in client.get("/api/v1/sweeps/?state=queued").json()["results"]] == [made.pk]
    assert client.get("/api/v1/sweeps/?state=finished").json()["results"] == []
    assert client.get("/api/v1/sweeps/?state=sideways").status_code == 400
    made.delete()
    viewer = UserFactory(username="viewer")
    client.force_authenticate(viewer)
    assert client.post("/api/v1/sweeps/", body(), format="json").status_code == 403
    assert not Sweep.objects.exists()


@override_settings(PROBE_CONTEXT="tests.sweeps.test_sweeps.FiftyGigabytesFree")
def test_a_sweep_that_cannot_fit_is_refused_with_the_numbers(sites: list[Any], coordinator: Any) -> None:
    """The issue's sweep: 3 sites x 3 modes x {10, 40, 100} x 1 GB; one step at a time, its largest step writes
    100 files of 1 GB to one destination, which also holds its own test file."""
    data = body(modes=["pull", "push", "streamed"], concurrency=[10, 40, 100], file_size=GB)
    with pytest.raises(ValidationError) as caught:
        sweep_start(user=coordinator, data=data)
    [message, *_] = caught.value.message_dict["file_size"]
    assert message.startswith("not enough space at davs://a.example.org:1094/data: the sweep needs 101 GB there")
    assert "its largest step writes 100 x 1 GB there" in message and "50 GB are free" in message
    assert not Sweep.objects.exists()
    assert sweep_start(user=coordinator, data={**data, "concurrency": [10, 40]}).steps.count() == 6 + 3 * 2 * 6


def test_a_step_from_a_site_with_an_agent_goes_to_its_agent_and_is_measured_at_that_site(
    sites: list[Any], coordinator: Any, no_workers: dict[str, list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    from sites.agents import agent_enroll

    agent_enroll(site=sites[1])  # B: no worker serves its queue, its agent takes its steps
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["B", "A"]))
    with django_capture_on_commit_callbacks(execute=True):
        sweep_advance(sweep.pk)
    first = sweep.steps.get(index=0)
    assert (first.source.name, first.queue, first.measured_from) == ("B", "agent.B", "B")
    assert no_workers["prepare"] == [(first.run_id, "agent.B")]


def test_steps_run_one_at_a_time_each_from_its_source(sites: list[Any], coordinator: Any) -> None:
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["A", "B"]))
    steps = list(sweep.steps.order_by("index"))
    assert [(s.source.name, s.destination.name) for s in steps] == [("A", "B"), ("B", "A")]
    sweep_advance(sweep.pk)
    sweep_advance(sweep.pk)  # a second advance while the step runs starts nothing more
    sweep.refresh_from_db()
    first, second = sweep.steps.order_by("index")
    assert sweep.state == "running" and first.state == "running" and second.state == "pending"
    assert first.queue == "site.A" and first.measured_from == "A"
    assert first.run.parameters["copy_mode"] == "pull" and first.run.created_by == coordinator
    # The run ends, but its copies are still being deleted: the next step waits for the disk.
    Run.objects.filter(pk=first.run_id).update(state="finished", finished_at=timezone.now(), copies="deleting")
    sweep_advance(sweep.pk)
    assert sweep.steps.get(index=1).state == "pending"
    Run.objects.filter(pk=first.run_id).update(copies="deleted")
    sweep_advance(sweep.pk)
    second = sweep.steps.get(index=1)
    assert sweep.steps.get(index=0).state == "ended" and second.state == "running"
    assert second.queue == "default" and second.measured_from == "portal"  # no worker at B
    Run.objects.filter(pk=second.run_id).update(state="failed", finished_at=timezone.now(), copies="deleted")
    sweeps_advance()
    sweep.refresh_from_db()
    assert sweep.state == "finished" and sweep.message == "2 of 2 steps ran"
    assert sweep_progress(sweep).as_dict()["steps_ended"] == 2


def test_a_step_whose_run_is_refused_is_skipped_with_the_reason(sites: list[Any], coordinator: Any) -> None:
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["A", "B"]))
    sweep.parameters["steps"][0]["concurrency"] = 0  # the plan no longer holds when the step's turn comes
    sweep.save()
    sweep_advance(sweep.pk)
    first, second = sweep.steps.order_by("index")
    assert first.state == "not-started" and "concurrency must be from 1" in first.message and first.run is None
    assert second.state == "running"
    rows = matrix_rows(sweep)
    assert rows[0]["state"] == "not-started" and "concurrency must be from 1" in rows[0]["top_error"]
    assert rows[1]["state"] == "running" and rows[1]["files_ok"] == 0


def test_a_sweep_of_which_no_step_can_start_fails(sites: list[Any], coordinator: Any) -> None:
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["A", "B"]))
    for step in sweep.parameters["steps"]:
        step["file_size"] = -1
    sweep.save()
    sweep_advance(sweep.pk)
    sweep.refresh_from_db()
    assert sweep.state == "failed" and sweep.message.startswith("no step could start: file_size must be")


def test_cancel_stops_the_current_run_and_the_pending_steps(sites: list[Any], coordinator: Any) -> None:
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], sites=["A", "B"]))
    sweep_advance(sweep.pk)
    Run.objects.filter(sweep_step__sweep=sweep).update(state="running", copies="present")  # it has written
    sweep_cancel(sweep, user=coordinator)
    sweep.refresh_from_db()
    states = list(sweep.steps.order_by("index").values_list("state", "run__state"))
    # The current step's run is cancelled, and the step runs on until its copies are gone.
    assert sweep.state == "cancelled" and states[0] == ("running", "cancelled")
    assert {state for state, _ in states[1:]} == {"cancelled"}
    sweep_advance(sweep.pk)  # an advance after the cancel starts nothing
    assert Run.objects.count() == 1
    assert sweep.steps.get(index=0).state == "running"  # its copies are still being deleted
    Run.objects.filter(sweep_step__sweep=sweep).update(copies="deleted")
    sweep_advance(sweep.pk)
    assert sweep.steps.get(index=0).state == "ended"
    with pytest.raises(ValidationError):
        sweep_cancel(sweep, user=coordinator)


def test_cancel_while_the_current_run_ends_by_itself_still_cancels_the_sweep(
    sites: list[Any], coordinator: Any
) -> None:
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], sites=["A", "B"]))
    sweep_advance(sweep.pk)
    run = sweep.steps.get(index=0).run
    stale = Sweep.objects.get(pk=sweep.pk)
    Run.objects.filter(pk=run.pk).update(state="finished", finished_at=timezone.now(), copies="deleted")
    sweep_cancel(stale, user=coordinator)  # the run it read as running has ended meanwhile
    sweep.refresh_from_db()
    assert sweep.state == "cancelled" and Run.objects.get(pk=run.pk).state == "finished"


def _running_step_run(coordinator: Any, no_workers: dict[str, list[Any]], capture: Any) -> tuple[Sweep, Run]:
    """A sweep of one transfer step whose run has begun writing, its first advance heard and forgotten."""
    with capture(execute=True):
        sweep = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["A", "B"]))
    sweep_advance(sweep.pk)
    run = sweep.steps.get(index=0).run
    Run.objects.filter(pk=run.pk).update(state="running", started_at=timezone.now(), copies="present")
    no_workers["advance"].clear()
    return sweep, run


def test_a_step_run_ended_by_the_reapers_deadline_sends_its_sweeps_advance(
    sites: list[Any], coordinator: Any, no_workers: dict[str, list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    sweep, run = _running_step_run(coordinator, no_workers, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        runs_reap(now=run.deadline + timedelta(seconds=1), broker_lost=False)
    run.refresh_from_db()
    assert run.state == "failed" and no_workers["advance"] == [sweep.pk]


def test_a_step_run_whose_copies_are_deleted_sends_its_sweeps_advance_and_the_step_ends(
    sites: list[Any], coordinator: Any, no_workers: dict[str, list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    sweep, run = _running_step_run(coordinator, no_workers, django_capture_on_commit_callbacks)
    run_end(run_id=run.pk, state="finished", message="finished")
    sweep_advance(sweep.pk)
    assert sweep.steps.get(index=0).state == "running"  # its copies are being deleted
    with django_capture_on_commit_callbacks(execute=True):
        run_copies_deleted(run.pk, deleted=1, errors=[])
    assert no_workers["advance"] == [sweep.pk]
    sweep_advance(sweep.pk)
    assert sweep.steps.get(index=0).state == "ended"


def test_a_save_of_a_step_run_is_not_its_end_and_sends_nothing(
    sites: list[Any], coordinator: Any, no_workers: dict[str, list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    _, run = _running_step_run(coordinator, no_workers, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        run.message = "progress"
        run.save(update_fields=["message"])
    assert no_workers["advance"] == []


def test_a_steps_rates_are_its_own_bytes_over_its_active_window_and_its_file_rates_per_round(
    sites: list[Any], coordinator: Any
) -> None:
    """4 files of 100 MB at C = 2 on A -> B over [0, 10), [0, 10), [10, 20), [12, 17): 400 MB over the 20 s the
    link was active is 20 MB/s; the file rates 10 + 10 + 10 + 20 = 50 MB/s are two rounds of two files, 25 MB/s per
    round. A transfer of another run on the same link at the same time counts nothing here."""
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], sites=["A", "B"], network=False, file_count=4))
    sweep_advance(sweep.pk)
    step = sweep.steps.get(index=0)
    other = Run.objects.create(kind="transfer", parameters={})
    zero = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    spans = [
        (0, 10, step.run_id),
        (0, 10, step.run_id),
        (10, 20, step.run_id),
        (12, 17, step.run_id),
        (0, 40, other.pk),
    ]
    for number, (begin, end, run_id) in enumerate(spans):
        TransferRecord.objects.create(
            source_site=sites[0],
            destination_site=sites[1],
            run_id=run_id,
            bytes=100 * 10**6,
            start=zero + timedelta(seconds=begin),
            end=zero + timedelta(seconds=end),
            state="ok",
            origin="probe",
            origin_id=f"r{number}",
            mode="pull",
            concurrency=2,
        )
    row = next(row for row in matrix_rows(sweep) if row["source"] == "A" and row["destination"] == "B")
    assert row["volume"] == 400 * 10**6 and row["active_seconds"] == 20
    assert row["aggregate_rate"] == pytest.approx(20e6)
    assert row["sum_of_file_rates"] == pytest.approx(25e6)


def test_network_rows_read_the_probe_summary(sites: list[Any], coordinator: Any) -> None:
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], sites=["A", "B"]))
    sweep_advance(sweep.pk)
    step = sweep.steps.get(index=0)
    summary = {
        "ok": True,
        "rate": 1.25e9,
        "path_mtu": 1500,
        "local_mtu": 9000,
        "hops": 3,
        "warnings": ["MTU mismatch: the local interface has MTU 9000 but the path MTU is 1500; ..."],
        "pscheduler": {"succeeded": True, "summary": {"summary": {"retransmits": 12}}},
    }
    Run.objects.filter(pk=step.run_id).update(state="finished", summary=summary)
    [row, _] = network_rows(sweep)
    assert (row["source"], row["destination"], row["iperf3_bps"], row["iperf3_rate"]) == ("A", "B", 1e10, 1.25e9)
    assert (row["retransmits"], row["path_mtu"], row["mtu_mismatch"], row["error"]) == (12, 1500, True, "")


def test_short_errors_as_the_slides_showed_them() -> None:
    text = "[gfal_http_copy][perform_copy] ERROR: Copy failed with mode pull: 405 Method Not Allowed\nmore"
    assert short_error(text) == "Copy failed with mode pull: 405 Method Not Allowed"
    assert len(short_error("x" * 500)) == 60 and short_error("") == ""
    seen = (
        "destination refused the write: TRANSFER ERROR: Copy failed (3rd pull). Last attempt: copy HTTP 405 : "
        "Method Not Allowed, Permission refused"
    )
    assert short_error(seen) == "destination refused the write: HTTP 405 Method Not Allowed"


def test_a_ddm_service_reads_its_experiments_sweeps_only(sites: list[Any], coordinator: Any) -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    mine = sweep_start(user=coordinator, data=body(), activity=ActivityFactory(experiment=atlas, kind="transfer"))
    theirs = sweep_start(user=coordinator, data=body(), activity=ActivityFactory(experiment=cms, kind="transfer"))
    adhoc = sweep_start(user=coordinator, data=body())
    ddm = UserFactory(username="ddm")
    membership_grant(user=ddm, role="ddm", experiment=atlas)
    client = APIClient()
    client.force_authenticate(ddm)
    assert [s["id"] for s in client.get("/api/v1/sweeps/").json()["results"]] == [mine.pk]
    for hidden in (theirs, adhoc):
        assert client.get(f"/api/v1/sweeps/{hidden.pk}/matrix/").status_code == 404
    assert SweepStep.objects.filter(sweep=adhoc).count() == 6 + 12


def test_compare_rows_are_this_over_earlier_link_by_link() -> None:
    def row(source: str, rate: float | None) -> dict[str, Any]:
        return {"source": source, "destination": "B", "mode": "pull", "concurrency": 10, "aggregate_rate": rate}

    rows = compare_rows([row("A", 2e9), row("C", 1e9)], [row("A", 1e9), row("D", 5e8)])
    assert [(r["source"], r["this_rate"], r["earlier_rate"], r["ratio"]) for r in rows] == [
        ("A", 2e9, 1e9, 2.0),
        ("C", 1e9, None, None),
        ("D", None, 5e8, None),
    ]


def test_the_pages_their_exports_and_a_bounded_number_of_queries(
    sites: list[Any], coordinator: Any, client: Any, django_assert_max_num_queries: Any
) -> None:
    client.force_login(coordinator)
    earlier = sweep_start(user=coordinator, data=body(name="earlier"))
    sweep = sweep_start(user=coordinator, data=body(name="later", concurrency=[2, 4, 8]))
    for made in (earlier, sweep):
        sweep_advance(made.pk)
    assert client.get("/sweeps/").status_code == 200
    with django_assert_max_num_queries(20):  # 6 + 36 steps: the queries do not grow with the steps
        page = client.get(f"/sweeps/{sweep.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and "Throughput, push, 8 files in parallel" in html
    assert f"compare/?with={earlier.pk}" in html and 'http-equiv="refresh"' in html  # under way: it refreshes
    csv = client.get(f"/sweeps/{sweep.pk}/?table=throughput&format=csv").content.decode().splitlines()
    assert csv[0].startswith("step,run,state,source,destination,mode,concurrency,files_ok") and len(csv) == 37
    assert client.get(f"/sweeps/{sweep.pk}/?table=colour&format=csv").status_code == 404
    compared = client.get(f"/sweeps/{sweep.pk}/compare/?with={earlier.pk}&format=json").json()["rows"]
    assert len(compared) == 36 + 6  # every (link, mode, concurrency) of either, and iperf3 per link
    assert client.get(f"/sweeps/{sweep.pk}/compare/").status_code == 200
    response = client.post(f"/sweeps/{sweep.pk}/cancel/")
    assert response.status_code == 302 and Sweep.objects.get(pk=sweep.pk).state == "cancelled"


def test_the_runs_of_an_activitys_sweep_count_for_that_activity(sites: list[Any], coordinator: Any) -> None:
    activity = ActivityFactory(kind="transfer")
    sweep = sweep_start(user=coordinator, data=body(modes=["pull"], sites=["A", "B"]), activity=activity)
    sweep_advance(sweep.pk)
    network = sweep.steps.get(index=0).run
    assert (network.kind, network.activity) == ("network", activity)
    for index in (0, 1):  # the two network steps end
        Run.objects.filter(pk=sweep.steps.get(index=index).run_id).update(state="finished", finished_at=timezone.now())
        sweep_advance(sweep.pk)
    transfer = sweep.steps.get(index=2).run
    assert (transfer.kind, transfer.activity) == ("transfer", activity)
    with pytest.raises(ValidationError, match="counts for a transfer activity"):
        sweep_start(user=coordinator, data=body(), activity=ActivityFactory(kind="staging"))


def test_sweeps_that_share_a_site_run_one_after_the_other(
    sites: list[Any], coordinator: Any, no_workers: dict[str, list[Any]], django_capture_on_commit_callbacks: Any
) -> None:
    first = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["A", "B"]))
    second = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["B", "C"]))
    StorageEndpointFactory(site=SiteFactory(name="D"), url="davs://d.example.org:1094/data", kind="disk")
    apart = sweep_start(user=coordinator, data=body(modes=["pull"], network=False, sites=["C", "D"]))
    sweeps_advance()
    for sweep in (first, second, apart):
        sweep.refresh_from_db()
    assert (first.state, second.state) == ("running", "queued")
    assert second.message == f"waits for sweep {first.pk} (s), which measures some of the same sites"
    assert apart.state == "queued" and f"waits for sweep {second.pk}" in apart.message  # C: after the second
    no_workers["advance"].clear()
    Run.objects.filter(sweep_step__sweep=first).update(state="running", copies="present")  # it has written
    with django_capture_on_commit_callbacks(execute=True):
        sweep_cancel(first, user=coordinator)
    assert set(no_workers["advance"]) == {first.pk}  # its own: its cancelled run's copies are still at B
    sweep_advance(second.pk)
    second.refresh_from_db()
    assert second.state == "queued" and f"waits for sweep {first.pk}" in second.message
    Run.objects.filter(sweep_step__sweep=first).update(copies="deleted")  # its run's copies are gone
    with django_capture_on_commit_callbacks(execute=True):
        sweep_advance(first.pk)
    woken = [sweep_id for sweep_id in no_workers["advance"] if sweep_id != first.pk]
    assert woken == [second.pk, apart.pk]  # the sweeps that may wait for it
    sweep_advance(second.pk)
    second.refresh_from_db()
    assert (second.state, second.message) == ("running", "")


def test_explicit_links_are_checked_one_by_one(sites: list[Any]) -> None:
    plan = sweep_plan(body(sites=None, links=[{"source": "C", "destination": "A"}], modes=["push"], network=False))
    assert [(s.source.name, s.destination.name, s.mode) for s in plan.steps] == [("C", "A", "push")]
    links = [
        {"source": "A", "destination": "A"},
        {"source": "A", "destination": "B"},
        {"source": "A", "destination": "B"},
        {"source": "A"},
    ]
    with pytest.raises(ValidationError) as caught:
        sweep_plan({**body(), "links": links, "sites": None})
    assert caught.value.message_dict["links"] == [
        "link 1: A to itself is not a link",
        "link 3: A -> B is given twice",
        "link 4: give {\"source\": SITE, \"destination\": SITE}, not {'source': 'A'}",
    ]
