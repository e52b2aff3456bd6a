"""The run pages: the live run page and its htmx progress panel (polling stops once the run has ended), Cancel,
a challenge's runs with exports, the Run form of an activity with its overrides, and who may do what."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from django.utils import timezone

from challenges.models import Activity
from results.models import TransferRecord
from runs.models import Run, RunFile
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory, UserFactory

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def activity() -> Activity:
    atlas = ExperimentFactory(name="ATLAS")
    source = SiteFactory(name="SRC", experiments=[atlas])
    destination = SiteFactory(name="DST", experiments=[atlas])
    StorageEndpointFactory(site=source, url="root://127.0.0.1:11094//data", tpc_modes=["pull", "push"])
    StorageEndpointFactory(site=destination, url="root://127.0.0.1:11095//data", tpc_modes=["pull", "push"])
    now = timezone.now()
    activity = ActivityFactory(
        challenge=ChallengeFactory(slug="dc", name="Data Challenge", start=now - timedelta(days=1),
                                   end=now + timedelta(days=6)),
        name="ATLAS T0 export",
        experiment=atlas,
        source=source,
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=5),
        file_count=4,
        file_size=1_000_000,
        concurrency=2,
        copy_mode="native",
    )  # fmt: skip
    activity.targets.create(site=destination, direction="in", rate=1e9)
    return activity


@pytest.fixture
def coordinator(client: Client) -> Client:
    user = UserFactory(username="coordinator")
    membership_grant(user=user, role="coordinator")
    client.force_login(user)
    return client


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(UserFactory(username="viewer"))
    return client


def running_run(activity: Activity, states: list[str]) -> Run:
    """A run in the middle of its work: files done 1.5 s each over the last seconds, the rest as given."""
    now = timezone.now()
    run = Run.objects.create(
        activity=activity, kind="transfer", state="running", started_at=now - timedelta(seconds=20)
    )
    RunFile.objects.bulk_create(
        RunFile(
            run=run,
            index=index,
            source_url=f"root://127.0.0.1:11094//data/f{index}",
            destination_url=f"root://127.0.0.1:11095//data/f{index}",
            size=250_000_000,
            state=state,
            attempt=0 if state == "queued" else 1,
            start=None if state == "queued" else now - timedelta(seconds=10),
            end=now - timedelta(seconds=1) if state in ("done", "failed") else None,
            bytes=250_000_000 if state == "done" else 0,
            error="the destination refuses writes" if state == "failed" else "",
        )
        for index, state in enumerate(states)
    )
    return run


def text(response: Any) -> str:
    return response.content.decode()


def test_the_run_page_shows_the_progress_and_polls_while_the_run_goes_on(viewer: Client, activity: Activity) -> None:
    run = running_run(activity, ["done", "done", "failed", "running", "queued", "queued"])
    page = text(viewer.get(f"/challenges/runs/{run.pk}/"))
    assert 'id="files-done">2 / 6<' in page
    assert 'id="files-failed">1<' in page
    assert 'id="files-in-flight">1<' in page
    assert 'id="files-queued">2<' in page
    assert 'id="bytes-done" title="500000000 bytes">500 MB<' in page
    assert "file 2, try 1" in page and "the destination refuses writes" in page
    assert f'hx-get="/challenges/runs/{run.pk}/progress/"' in page
    assert 'hx-trigger="every 2s"' in page
    # htmx comes from our own static files, never a CDN
    assert '<script src="/static/django_htmx/htmx-2.min.js"' in page
    assert "https://" not in page.split("<main>")[1]


def test_the_run_page_says_its_credential_and_the_scopes_asked_never_a_token(
    viewer: Client, activity: Activity
) -> None:
    run = running_run(activity, ["done", "running"])
    requests = [{"audience": "root://127.0.0.1:11095", "scopes": ["storage.create:/data/r", "storage.read:/data/r"]}]
    run.credential = "token"
    run.credential_detail = {"kind": "token", "source": "client-credentials", "issuer": "https://iam.example"}
    run.credential_detail["requests"] = requests
    run.save()
    page = text(viewer.get(f"/challenges/runs/{run.pk}/"))
    assert 'id="run-credential">Credential: <strong>token</strong>' in page
    assert "(client-credentials from https://iam.example)" in page
    assert (
        "<code>root://127.0.0.1:11095</code>: <code>storage.create:/data/r</code> <code>storage.read:/data/r</code>"
        in page
    )
    body = viewer.get(f"/api/v1/runs/{run.pk}/").json()
    assert (body["credential"], body["credential_scopes"]) == ("token", requests)


def test_the_served_htmx_is_the_real_library() -> None:
    path = finders.find("django_htmx/htmx-2.min.js")
    assert path is not None
    with open(path, encoding="utf-8") as handle:
        assert 'version:"2.' in handle.read()


def test_the_progress_panel_alone_is_what_htmx_swaps_in(viewer: Client, activity: Activity) -> None:
    run = running_run(activity, ["done", "running"])
    response = viewer.get(f"/challenges/runs/{run.pk}/progress/", **HTMX)
    panel = text(response)
    assert panel.lstrip().startswith('<section id="run-progress"')
    assert "<html" not in panel
    assert 'id="files-done">1 / 2<' in panel


def test_polling_stops_once_the_run_has_ended(viewer: Client, activity: Activity) -> None:
    run = running_run(activity, ["done", "done"])
    Run.objects.filter(pk=run.pk).update(state="finished", finished_at=run.started_at + timedelta(seconds=20))
    for file in run.files.all():  # what the engine stores for each done file
        TransferRecord.objects.create(
            run=run,
            bytes=file.bytes,
            start=file.start,
            end=file.end,
            state="ok",
            origin="probe",
            origin_id=f"p{file.pk}",
        )
    panel = text(viewer.get(f"/challenges/runs/{run.pk}/progress/", **HTMX))
    assert 'id="run-state" class="state-finished">finished<' in panel
    # 500 MB over its active window (the files' 9 s from first start to last end), however long ago it ended
    assert 'id="run-average-rate" title="5555555' in panel  # B/s, in full
    assert 'first start to last end (9.0 s)">55.6 MB/s</dd>' in panel
    assert 'id="run-eta"' not in panel
    assert "hx-trigger" not in panel
    assert "hx-get" not in panel


def test_only_coordinators_see_and_use_cancel(viewer: Client, activity: Activity) -> None:
    run = running_run(activity, ["running", "queued"])
    assert "Cancel run" not in text(viewer.get(f"/challenges/runs/{run.pk}/"))
    assert viewer.post(f"/challenges/runs/{run.pk}/cancel/", **HTMX).status_code == 403
    assert Run.objects.get(pk=run.pk).state == "running"


def test_a_coordinator_cancels_from_the_run_page(coordinator: Client, activity: Activity) -> None:
    run = running_run(activity, ["done", "queued", "queued"])
    page = text(coordinator.get(f"/challenges/runs/{run.pk}/"))
    assert "Cancel run" in page
    assert f'hx-confirm="Cancel run {run.pk}?' in page
    panel = text(coordinator.post(f"/challenges/runs/{run.pk}/cancel/", **HTMX))
    assert 'id="files-cancelled">2<' in panel
    assert "Cancel run" not in panel
    assert set(run.files.values_list("state", flat=True)) == {"done", "cancelled"}


def test_cancel_without_htmx_goes_back_to_the_run_page(coordinator: Client, activity: Activity) -> None:
    run = running_run(activity, ["queued"])
    response = coordinator.post(f"/challenges/runs/{run.pk}/cancel/")
    assert response.status_code == 302
    assert response["Location"] == f"/challenges/runs/{run.pk}/"


def test_the_run_page_links_to_its_records_in_the_results(viewer: Client, activity: Activity) -> None:
    run = running_run(activity, ["done"])
    Run.objects.filter(pk=run.pk).update(parameters={"site": "SRC"})
    page = text(viewer.get(f"/challenges/runs/{run.pk}/"))
    assert f'href="/results/dc/records/?run={run.pk}&amp;experiment=ATLAS&amp;source=SRC"' in page
    assert "Transfer records in the results (ATLAS from SRC)" in page
    assert f'href="/api/v1/runs/{run.pk}/files/"' in page


def test_the_runs_of_a_challenge_are_listed_filtered_and_exported(viewer: Client, activity: Activity) -> None:
    running = running_run(activity, ["running"])
    finished = Run.objects.create(activity=activity, kind="transfer", state="finished", message="all 4 files done")
    page = text(viewer.get("/challenges/dc/runs/"))
    assert f'href="/challenges/runs/{running.pk}/"' in page
    assert "all 4 files done" in page
    only_finished = text(viewer.get("/challenges/dc/runs/?state=finished"))
    assert f'id="run-{finished.pk}"' in only_finished
    assert f'id="run-{running.pk}"' not in only_finished
    exported = json.loads(viewer.get("/challenges/dc/runs/?format=json").content)
    assert [row["id"] for row in exported["rows"]] == [finished.pk, running.pk]
    csv_text = text(viewer.get("/challenges/dc/runs/?format=csv"))
    assert csv_text.splitlines()[0].startswith("id,activity,kind,state")


def test_the_clock_has_a_run_link_for_coordinators_only(client: Client, activity: Activity) -> None:
    client.force_login(UserFactory(username="viewer"))
    assert f"/challenges/dc/activities/{activity.pk}/run/" not in text(client.get("/challenges/dc/"))
    boss = UserFactory(username="boss")
    membership_grant(user=boss, role="coordinator")
    client.force_login(boss)
    page = text(client.get("/challenges/dc/"))
    assert f'href="/challenges/dc/activities/{activity.pk}/run/">Run</a>' in page
    assert 'href="/challenges/dc/runs/"' in page


def test_the_run_form_is_for_coordinators(viewer: Client, activity: Activity) -> None:
    assert viewer.get(f"/challenges/dc/activities/{activity.pk}/run/").status_code == 403
    assert viewer.post(f"/challenges/dc/activities/{activity.pk}/run/", {"file_count": 2}).status_code == 403
    assert not Run.objects.exists()


def test_the_run_form_shows_the_activity_values_it_overrides(coordinator: Client, activity: Activity) -> None:
    page = text(coordinator.get(f"/challenges/dc/activities/{activity.pk}/run/"))
    assert 'name="file_count"' in page and 'placeholder="4"' in page
    assert 'placeholder="1000000"' in page


def test_a_bad_override_is_shown_in_place_and_starts_nothing(coordinator: Client, activity: Activity) -> None:
    response = coordinator.post(f"/challenges/dc/activities/{activity.pk}/run/", {"file_count": "0"})
    assert response.status_code == 200
    assert "Ensure this value is greater than or equal to 1." in text(response)
    assert not Run.objects.exists()


def test_a_coordinator_starts_a_run_with_overrides(coordinator: Client, activity: Activity) -> None:
    response = coordinator.post(
        f"/challenges/dc/activities/{activity.pk}/run/", {"file_count": "2", "concurrency": "1"}
    )
    run = Run.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/challenges/runs/{run.pk}/"
    assert run.files.count() == 2
    page = text(coordinator.get(response["Location"]))
    assert 'id="files-done">0 / 2<' in page


def test_the_run_page_and_the_runs_list_read_in_a_fixed_number_of_queries(
    viewer: Client, activity: Activity, django_assert_max_num_queries: Any
) -> None:
    run = running_run(activity, ["done", "failed", "running", "queued"] * 25)
    for _ in range(30):
        Run.objects.create(activity=activity, kind="transfer", state="finished")
    viewer.get("/challenges/dc/runs/")
    with django_assert_max_num_queries(11):  # the page's matrix reads the run's records once (+ savepoint, work_mem)
        assert viewer.get(f"/challenges/runs/{run.pk}/").status_code == 200
    with django_assert_max_num_queries(7):
        assert viewer.get(f"/challenges/runs/{run.pk}/progress/", **HTMX).status_code == 200
    with django_assert_max_num_queries(8):  # + the registry's endpoints and hosts, once, for the links' site names
        page = text(viewer.get("/challenges/dc/runs/"))
    assert page.count('<tr id="run-') == 31


def test_the_run_page_lists_the_parameters_it_ran_with(viewer: Client, activity: Activity) -> None:
    run = Run.objects.create(
        activity=activity,
        kind="transfer",
        parameters={"destinations": ["root://127.0.0.1:1/a", "root://127.0.0.1:2/b"], "file_size": 1000, "site": None},
    )
    page = text(viewer.get(f"/challenges/runs/{run.pk}/"))
    assert "<code>root://127.0.0.1:1/a, root://127.0.0.1:2/b</code>" in page
    assert '<th scope="row">site</th><td><code>—</code>' in page


def test_what_run_start_refuses_is_shown_on_the_form(coordinator: Client, activity: Activity) -> None:
    Activity.objects.filter(pk=activity.pk).update(source=None)
    response = coordinator.post(f"/challenges/dc/activities/{activity.pk}/run/", {"file_count": "2"})
    assert response.status_code == 200
    assert "source: give the source endpoint URL (or run an activity that has a source site)" in text(response)
    assert not Run.objects.exists()


def test_a_page_export_is_read_with_an_api_token_as_the_api_is(activity: Activity) -> None:
    from django.test import Client as PlainClient

    from sites.tokens import token_create

    Run.objects.create(activity=activity, kind="transfer", state="finished")
    _, key = token_create(user=UserFactory(username="script"))
    anonymous = PlainClient()
    assert anonymous.get("/challenges/dc/runs/?format=csv").status_code == 302  # to the login page
    answer = anonymous.get("/challenges/dc/runs/?format=csv", HTTP_AUTHORIZATION=f"Token {key}")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/csv")
    assert anonymous.get("/challenges/dc/runs/?format=csv", HTTP_AUTHORIZATION="Token nope").status_code == 401


def test_a_network_runs_page_shows_iperf3_per_interval_its_statistics_and_the_mtu_warning(
    viewer: Client, activity: Activity
) -> None:
    def interval(end: float, gbits: float) -> dict[str, Any]:
        return {"summary": {"start": end - 1, "end": end, "throughput-bits": gbits * 1e9}}

    summary = {
        "rate": 2.5e9 / 8,  # bytes per second: 2.5 Gb/s
        "path_mtu": 1500,
        "local_mtu": 9000,
        "hops": 3,
        "warnings": ["path MTU 1500 is below the local interface's 9000"],
        "pscheduler": {
            "succeeded": True,
            "intervals": [interval(1, 2), interval(2, 0), interval(3, 4)],  # the idle second is no sample
            "summary": {"summary": {"retransmits": 7}},
        },
    }
    run = Run.objects.create(activity=activity, kind="network", state="finished", summary=summary)
    page = text(viewer.get(f"/challenges/runs/{run.pk}/"))
    assert "min 2 Gb/s · average 3 Gb/s · max 4 Gb/s · stdev 1.41 Gb/s" in page
    assert "Per interval (2 with data)" in page and "path MTU 1500 is below" in page
    assert "<td>7</td>" in page


def test_an_io_and_a_staging_runs_pages_show_what_their_probes_measured(viewer: Client, activity: Activity) -> None:
    io = Run.objects.create(
        activity=activity, kind="io", state="finished", summary={"write_rate": 2e8, "read_rate": 5e8, "size": 10**9}
    )
    page = text(viewer.get(f"/challenges/runs/{io.pk}/"))
    assert '<th scope="row">Write</th><td>200 MB/s</td>' in page and "<td>500 MB/s</td>" in page
    files = [
        {
            "source_url": "root://t//a",
            "ok": True,
            "end": "2026-01-01T00:00:12+00:00",
            "details": {"queue_seconds": 3.0, "stage_seconds": 9.0},
        },
        {
            "source_url": "root://t//b",
            "ok": True,
            "end": "2026-01-01T00:00:20+00:00",
            "details": {"queue_seconds": 12.0, "stage_seconds": 8.0},
        },
    ]
    summary = {
        "start": "2026-01-01T00:00:00+00:00",
        "seconds": 20.0,
        "staged": 2,
        "failed": 0,
        "requests": [{}],
        "files": files,
    }
    staging = Run.objects.create(activity=activity, kind="staging", state="finished", summary=summary)
    page = text(viewer.get(f"/challenges/runs/{staging.pk}/"))
    assert "Time to first file</th><td>12.0 s" in page and "Files per hour</th><td>360" in page
    assert "<td>3.0</td><td>9.0</td>" in page


def test_the_run_form_warns_when_the_activity_is_outside_its_window(coordinator: Client, activity: Activity) -> None:
    Activity.objects.filter(pk=activity.pk).update(
        start=timezone.now() + timedelta(days=1), end=timezone.now() + timedelta(days=2)
    )
    page = text(coordinator.get(f"/challenges/dc/activities/{activity.pk}/run/"))
    assert "window opens at" in page and "counts for none of its targets" in page
    Activity.objects.filter(pk=activity.pk).update(
        start=timezone.now() - timedelta(days=2), end=timezone.now() - timedelta(days=1)
    )
    assert "window closed at" in text(coordinator.get(f"/challenges/dc/activities/{activity.pk}/run/"))
    Activity.objects.filter(pk=activity.pk).update(end=timezone.now() + timedelta(days=1))
    assert "counts for none of its targets" not in text(
        coordinator.get(f"/challenges/dc/activities/{activity.pk}/run/")
    )


def test_the_runs_list_filters_by_activity(viewer: Client, activity: Activity) -> None:
    mine = Run.objects.create(activity=activity, kind="transfer", state="finished")
    other_activity = Activity.objects.create(
        challenge=activity.challenge,
        name="other",
        experiment=activity.experiment,
        mode="DT",
        kind="transfer",
        start=activity.start,
        end=activity.end,
    )
    other = Run.objects.create(activity=other_activity, kind="transfer", state="finished")
    page = viewer.get(f"/challenges/dc/runs/?activity={activity.pk}").content.decode()
    assert f'id="run-{mine.pk}"' in page and f'id="run-{other.pk}"' not in page
    assert viewer.get("/challenges/dc/runs/?activity=²").status_code == 200  # not a number: no filter, no 500
