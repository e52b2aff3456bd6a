"""The runs API: coordinators start and cancel runs, everyone logged in reads them (a DDM token only its own
experiment's), lists are paginated and filtered, bad input is a clear 400 that creates nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from challenges.models import Activity
from runs.models import Run, RunFile
from sites.choices import Role
from sites.models import Experiment, Site
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory

pytestmark = pytest.mark.django_db


def api(role: str | None, experiment: Experiment | None = None) -> APIClient:
    client = APIClient()
    if role is None:
        return client
    user = get_user_model().objects.create_user(f"{role}-{experiment}")
    site = Site.objects.get(name="SRC") if role == "site-admin" else None
    membership_grant(user=user, role=Role(role), experiment=experiment if role == "ddm" else None, site=site)
    client.force_authenticate(user)
    return client


@pytest.fixture
def world() -> dict[str, Any]:
    """Two experiments, each with an activity in one challenge; a transfer activity between two registered
    root:// endpoints that run_start accepts."""
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    source = SiteFactory(name="SRC", experiments=[atlas, cms])
    destination = SiteFactory(name="DST", experiments=[atlas, cms])
    StorageEndpointFactory(site=source, url="root://127.0.0.1:11094//data", tpc_modes=["pull", "push"])
    StorageEndpointFactory(site=destination, url="root://127.0.0.1:11095//data", tpc_modes=["pull", "push"])
    challenge = ChallengeFactory(slug="dc")
    other = ChallengeFactory(slug="other")
    now = timezone.now()
    atlas_activity = ActivityFactory(
        challenge=challenge,
        name="ATLAS T0 export",
        experiment=atlas,
        source=source,
        start=now - timedelta(hours=1),
        end=now + timedelta(hours=5),
        file_count=3,
        file_size=1000,
        concurrency=2,
        copy_mode="native",
    )
    atlas_activity.targets.create(site=destination, direction="in", rate=1e9)
    cms_activity = ActivityFactory(challenge=challenge, name="CMS", experiment=cms)
    other_activity = ActivityFactory(challenge=other, name="elsewhere", experiment=atlas)
    return {
        "atlas": atlas,
        "cms": cms,
        "atlas_activity": atlas_activity,
        "cms_activity": cms_activity,
        "other_activity": other_activity,
    }


def make_run(activity: Activity | None, state: str = "running", **fields: Any) -> Run:
    return Run.objects.create(activity=activity, kind="transfer", state=state, **fields)


def add_files(run: Run, states: list[str], size: int = 1_000_000) -> None:
    now = timezone.now()
    RunFile.objects.bulk_create(
        RunFile(
            run=run,
            index=index,
            source_url=f"root://127.0.0.1:11094//data/f{index}",
            destination_url=f"root://127.0.0.1:11095//data/f{index}",
            size=size,
            state=state,
            attempt=0 if state == "queued" else 1,
            start=None if state == "queued" else now - timedelta(seconds=10),
            end=now if state in ("done", "failed") else None,
            bytes=size if state == "done" else 0,
            mode="pull" if state == "done" else "",
            error="Permission denied (destination refuses writes)" if state == "failed" else "",
        )
        for index, state in enumerate(states)
    )


# --- reading -------------------------------------------------------------------------------------------------


def test_anonymous_calls_are_refused_with_401(world: dict[str, Any]) -> None:
    run = make_run(world["atlas_activity"])
    for response in (api(None).get("/api/v1/runs/"), api(None).get(f"/api/v1/runs/{run.pk}/")):
        assert response.status_code == 401
        assert response.json()["detail"] == "Authentication credentials were not provided."


def test_the_list_is_paginated_newest_first(world: dict[str, Any]) -> None:
    created = [make_run(world["atlas_activity"]) for _ in range(5)]
    client = api("viewer")
    first = client.get("/api/v1/runs/?limit=2").json()
    assert first["count"] == 5
    assert [row["id"] for row in first["results"]] == [created[4].pk, created[3].pk]
    second = client.get(first["next"]).json()
    assert [row["id"] for row in second["results"]] == [created[2].pk, created[1].pk]


def test_the_list_filters_by_challenge_activity_and_state(world: dict[str, Any]) -> None:
    finished = make_run(world["atlas_activity"], state="finished")
    running = make_run(world["cms_activity"], state="running")
    elsewhere = make_run(world["other_activity"], state="running")
    client = api("viewer")

    def ids(query: str) -> set[int]:
        response = client.get(f"/api/v1/runs/?{query}")
        assert response.status_code == 200, response.content
        return {row["id"] for row in response.json()["results"]}

    assert ids("challenge=dc") == {finished.pk, running.pk}
    assert ids(f"activity={world['cms_activity'].pk}") == {running.pk}
    assert ids("state=running") == {running.pk, elsewhere.pk}
    assert ids("challenge=dc&state=finished") == {finished.pk}


def test_an_unknown_state_filter_is_a_clear_400(world: dict[str, Any]) -> None:
    response = api("viewer").get("/api/v1/runs/?state=exploded")
    assert response.status_code == 400
    assert "exploded" in response.json()["state"][0]


def test_the_list_reads_runs_in_a_fixed_number_of_queries(
    world: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    for _ in range(12):
        make_run(world["atlas_activity"])
    make_run(None)
    client = api("viewer")
    client.get("/api/v1/runs/")  # the user's memberships are read once per user; warm it like a later request
    with django_assert_max_num_queries(6):
        response = client.get("/api/v1/runs/")
    assert len(response.json()["results"]) == 13


def test_a_ddm_token_reads_the_runs_of_its_own_experiment_only(world: dict[str, Any]) -> None:
    own = make_run(world["atlas_activity"])
    foreign = make_run(world["cms_activity"])
    ad_hoc = make_run(None)
    client = api("ddm", world["atlas"])
    listed = {row["id"] for row in client.get("/api/v1/runs/").json()["results"]}
    assert listed == {own.pk}
    assert client.get(f"/api/v1/runs/{own.pk}/").status_code == 200
    assert client.get(f"/api/v1/runs/{foreign.pk}/").status_code == 404
    assert client.get(f"/api/v1/runs/{ad_hoc.pk}/").status_code == 404
    assert client.get(f"/api/v1/runs/{foreign.pk}/files/").status_code == 404


def test_a_run_shows_its_live_progress_from_its_files(world: dict[str, Any]) -> None:
    run = make_run(world["atlas_activity"], started_at=timezone.now() - timedelta(minutes=1))
    add_files(run, ["done", "done", "failed", "running", "queued"])
    body = api("viewer").get(f"/api/v1/runs/{run.pk}/").json()
    assert body["challenge"] == "dc"
    assert body["experiment"] == "ATLAS"
    assert body["activity_name"] == "ATLAS T0 export"
    progress = body["progress"]
    assert progress["state"] == "running"
    assert progress["files_total"] == 5
    assert progress["files_done"] == 2
    assert progress["files_failed"] == 1
    assert progress["in_flight"] == 1
    assert progress["queued"] == 1
    assert progress["bytes_done"] == 2_000_000


def test_the_files_of_a_run_are_paginated_in_index_order_with_their_errors(world: dict[str, Any]) -> None:
    run = make_run(world["atlas_activity"])
    add_files(run, ["done", "failed", "done", "queued", "running"])
    client = api("viewer")
    first = client.get(f"/api/v1/runs/{run.pk}/files/?limit=2").json()
    assert first["count"] == 5
    assert [row["index"] for row in first["results"]] == [0, 1]
    assert first["results"][1]["state"] == "failed"
    assert first["results"][1]["error"] == "Permission denied (destination refuses writes)"
    assert [row["index"] for row in client.get(first["next"]).json()["results"]] == [2, 3]
    failed = client.get(f"/api/v1/runs/{run.pk}/files/?state=failed").json()
    assert [row["index"] for row in failed["results"]] == [1]
    assert client.get(f"/api/v1/runs/{run.pk}/files/?state=bogus").status_code == 400


# --- starting --------------------------------------------------------------------------------------------------


def test_only_coordinators_start_runs(world: dict[str, Any]) -> None:
    body = {"activity": world["atlas_activity"].pk}
    for role, experiment in (("viewer", None), ("site-admin", None), ("ddm", world["atlas"])):
        response = api(role, experiment).post("/api/v1/runs/", body, format="json")
        assert response.status_code == 403, role
        assert response.json()["detail"] == "Only coordinators start or cancel runs."
    assert api(None).post("/api/v1/runs/", body, format="json").status_code == 401
    assert not Run.objects.exists()


def test_a_run_needs_an_activity_or_a_kind(world: dict[str, Any]) -> None:
    response = api("coordinator").post("/api/v1/runs/", {"parameters": {"file_count": 2}}, format="json")
    assert response.status_code == 400
    assert response.json() == {"activity": ["give an activity, or a kind for an ad hoc run"]}
    assert not Run.objects.exists()


def test_an_unknown_activity_is_a_clear_400(world: dict[str, Any]) -> None:
    response = api("coordinator").post("/api/v1/runs/", {"activity": 999999}, format="json")
    assert response.status_code == 400
    assert "999999" in response.json()["activity"][0]
    assert not Run.objects.exists()


def test_a_coordinator_starts_a_run_of_an_activity_with_overrides(world: dict[str, Any]) -> None:
    activity = world["atlas_activity"]
    response = api("coordinator").post(
        "/api/v1/runs/", {"activity": activity.pk, "parameters": {"file_count": 2}}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert run.activity == activity
    assert body["state"] == run.state
    assert body["progress"]["files_total"] == 2
    assert run.files.count() == 2


def test_bad_parameters_are_per_field_400s_and_create_nothing(world: dict[str, Any]) -> None:
    response = api("coordinator").post(
        "/api/v1/runs/",
        {"activity": world["atlas_activity"].pk, "parameters": {"file_count": -3}},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "file_count" in str(response.json())
    assert not Run.objects.exists()
    assert not RunFile.objects.exists()


# --- cancelling ------------------------------------------------------------------------------------------------


def test_only_coordinators_cancel_runs(world: dict[str, Any]) -> None:
    run = make_run(world["atlas_activity"], state="queued")
    add_files(run, ["queued", "queued"])
    response = api("viewer").post(f"/api/v1/runs/{run.pk}/cancel/")
    assert response.status_code == 403
    assert response.json()["detail"] == "Only coordinators start or cancel runs."
    run.refresh_from_db()
    assert run.state == "queued"


def test_a_coordinator_cancels_a_run_and_its_queued_files(world: dict[str, Any]) -> None:
    run = make_run(world["atlas_activity"], state="running")
    add_files(run, ["done", "queued", "queued"])
    response = api("coordinator").post(f"/api/v1/runs/{run.pk}/cancel/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["progress"]["files_cancelled"] == 2
    assert body["progress"]["files_done"] == 1
    assert set(run.files.values_list("state", flat=True)) == {"done", "cancelled"}


# --- schema ----------------------------------------------------------------------------------------------------


def test_the_schema_of_the_runs_api_builds_without_warnings(tmp_path: Any) -> None:
    from django.core.management import call_command

    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    schema = (tmp_path / "schema.yaml").read_text()
    assert "/api/v1/runs/{id}/cancel/" in schema
    assert "/api/v1/runs/{id}/files/" in schema


def test_an_ad_hoc_run_to_a_scheme_the_workers_cannot_speak_is_refused(world: dict[str, Any]) -> None:
    body = {
        "kind": "transfer",
        "parameters": {
            "source": "root://127.0.0.1:11094//data",
            "destinations": ["s3://bucket.example.org/data"],
            "file_count": 2,
            "file_size": 1000,
        },
    }
    response = api("coordinator").post("/api/v1/runs/", body, format="json")
    assert response.status_code == 400, response.content
    (message,) = response.json()["destinations"]
    assert message.startswith("the workers cannot speak s3:// (s3://bucket.example.org/data)")
    assert not Run.objects.exists()


def test_an_unknown_parameter_is_named_in_the_error(world: dict[str, Any]) -> None:
    body = {"activity": world["atlas_activity"].pk, "parameters": {"files_count": 2}}
    response = api("coordinator").post("/api/v1/runs/", body, format="json")
    assert response.status_code == 400
    assert "unknown parameter 'files_count'" in response.json()["parameters"][0]
    assert not Run.objects.exists()


def test_an_ended_run_cannot_be_cancelled(world: dict[str, Any]) -> None:
    run = make_run(world["atlas_activity"], state="finished")
    response = api("coordinator").post(f"/api/v1/runs/{run.pk}/cancel/")
    assert response.status_code == 400
    assert response.json() == {"state": ["the run has already ended (finished)"]}
