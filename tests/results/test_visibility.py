"""What a DDM service reads of the results: the records of its own experiment only, on every page and export
(the rates table, a target over time, the comparison, the FROM x TO matrix, the records behind its cells and the
failure causes), as the planning API shows it the plans of its own experiment only."""

from __future__ import annotations

import csv
import io
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from results.models import TransferRecord
from results.services import records_store
from sites.models import Experiment, Site
from sites.roles import membership_grant
from sites.tokens import token_create

pytestmark = pytest.mark.django_db

T0 = datetime(2022, 3, 14, tzinfo=UTC)
GB = 1e9
_ids = itertools.count()


def at(minutes: float, origin: datetime = T0) -> datetime:
    return origin + timedelta(minutes=minutes)


def moved(
    experiment: Experiment,
    source: Site,
    destination: Site,
    *,
    start: float = 0,
    end: float = 60,
    size: float = 360 * GB,
    message: str = "",
    origin: datetime = T0,
) -> TransferRecord:
    return TransferRecord(
        experiment=experiment,
        source_site=source,
        destination_site=destination,
        bytes=0 if message else int(size),
        start=at(start, origin),
        end=at(end, origin),
        state="failed" if message else "ok",
        error_message=message,
        mode="pull",
        origin="probe",
        origin_id=f"vis{next(_ids)}",
    )


@pytest.fixture
def world() -> dict[str, Any]:
    """One challenge (compared with an earlier one) where ATLAS moves CERN -> CNAF and CMS moves CERN -> KIT, each
    with a target into its destination and one failure whose message names its experiment."""
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    cern = Site.objects.create(name="CERN", tier=0, country="CH")
    cnaf = Site.objects.create(name="CNAF", tier=1, country="IT")
    kit = Site.objects.create(name="KIT", tier=1, country="DE")
    earlier = Challenge.objects.create(name="DC21", slug="dc21", start=at(-1440 * 200), end=at(-1440 * 199))
    challenge = Challenge.objects.create(name="TC", slug="tc", start=T0, end=at(120), compare_with=earlier)
    targets = {}
    for plan, experiment in itertools.product((challenge, earlier), (atlas, cms)):
        destination = cnaf if experiment == atlas else kit
        activity = Activity.objects.create(
            challenge=plan,
            name=f"{experiment.name.lower()}-{plan.slug}",
            experiment=experiment,
            mode="DT",
            kind="transfer",
            start=plan.start,
            end=at(60, plan.start),
        )
        targets[activity.name] = Target.objects.create(activity=activity, site=destination, direction="in", rate=GB)
    records_store(
        records=[
            moved(atlas, cern, cnaf),
            moved(atlas, cern, cnaf, start=5, end=6, message="ATLAS door: Connection timed out"),
            moved(cms, cern, kit, size=720 * GB),
            moved(cms, cern, kit, start=5, end=6, message="CMS door: Permission denied"),
            moved(atlas, cern, cnaf, origin=earlier.start),
            moved(cms, cern, kit, origin=earlier.start),
        ]
    )
    return {"atlas": atlas, "cms": cms, "challenge": challenge, "targets": targets}


@pytest.fixture
def atlas_ddm(client: Client, world: dict[str, Any]) -> Client:
    user = get_user_model().objects.create_user("atlas-ddm")
    membership_grant(user=user, role="ddm", experiment=world["atlas"])
    client.force_login(user)
    return client


@pytest.fixture
def viewer(client: Client, world: dict[str, Any]) -> Client:
    client.force_login(get_user_model().objects.create_user("viewer"))
    return client


def csv_rows(response: Any) -> list[dict[str, str]]:
    content = b"".join(response.streaming_content) if response.streaming else response.content
    return list(csv.DictReader(io.StringIO(content.decode())))


def links(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(row["source"], row["destination"]) for row in rows}


def test_a_ddm_service_sees_only_its_experiments_links_in_the_matrix(atlas_ddm: Client) -> None:
    page = atlas_ddm.get("/results/tc/matrix/")
    assert [(cell.source, cell.destination) for cell in page.context["matrix"].cells] == [("CERN", "CNAF")]
    assert "KIT" not in page.content.decode()
    assert [e.name for e in page.context["experiments"]] == ["ATLAS"]  # the selector offers its own only
    assert links(atlas_ddm.get("/results/tc/matrix/", {"format": "json"}).json()["rows"]) == {("CERN", "CNAF")}
    split = atlas_ddm.get("/results/tc/matrix/", {"format": "csv", "split": "mode,concurrency"})
    assert links(csv_rows(split)) == {("CERN", "CNAF")}


def test_a_ddm_service_asking_for_another_experiments_matrix_gets_nothing(atlas_ddm: Client) -> None:
    assert atlas_ddm.get("/results/tc/matrix/", {"experiment": "CMS", "format": "json"}).json()["rows"] == []
    assert atlas_ddm.get("/results/tc/matrix/", {"experiment": "CMS"}).context["matrix"].cells == []


def test_a_viewer_sees_every_experiment_in_the_matrix_and_the_failure_causes(viewer: Client) -> None:
    assert links(viewer.get("/results/tc/matrix/", {"format": "json"}).json()["rows"]) == {
        ("CERN", "CNAF"),
        ("CERN", "KIT"),
    }
    assert links(viewer.get("/results/tc/failures/", {"format": "json"}).json()["rows"]) == {
        ("CERN", "CNAF"),
        ("CERN", "KIT"),
    }


def test_a_ddm_service_sees_only_its_experiments_failure_causes(atlas_ddm: Client) -> None:
    page = atlas_ddm.get("/results/tc/failures/")
    text = page.content.decode()
    assert "ATLAS door" in text and "CMS door" not in text and "permission" not in text
    assert [e.name for e in page.context["experiments"]] == ["ATLAS"]
    causes = atlas_ddm.get("/results/tc/failures/", {"format": "json"}).json()["rows"]
    assert causes == [{"source": "CERN", "destination": "CNAF", "mode": "pull", "failures": 1, "timeout": 1}]
    messages = csv_rows(atlas_ddm.get("/results/tc/failures/", {"format": "csv", "table": "messages"}))
    assert [row["message"] for row in messages] == ["ATLAS door: Connection timed out"]
    hourly = atlas_ddm.get("/results/tc/failures/", {"format": "json", "table": "hourly"}).json()["rows"]
    assert [(row["category"], row["failures"]) for row in hourly] == [("timeout", 1)]
    other = atlas_ddm.get("/results/tc/failures/", {"experiment": "CMS", "format": "json"}).json()["rows"]
    assert other == []


def test_the_records_behind_a_ddm_services_matrix_cells_are_its_own(atlas_ddm: Client) -> None:
    exported = csv_rows(atlas_ddm.get("/results/tc/records/", {"source": "CERN", "format": "csv"}))
    assert {row["experiment"] for row in exported} == {"ATLAS"} and len(exported) == 2
    assert atlas_ddm.get("/results/tc/records/", {"destination": "KIT"}).context["records"] == []


def test_a_ddm_token_reads_only_its_experiments_records(world: dict[str, Any]) -> None:
    user = get_user_model().objects.create_user("atlas-injector")
    _, key = token_create(user=user, membership=membership_grant(user=user, role="ddm", experiment=world["atlas"]))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    body = client.get("/api/v1/records/", {"challenge": "tc"}).json()
    assert [row["experiment"] for row in body["results"]] == ["ATLAS", "ATLAS"]


def test_a_ddm_service_sees_only_its_experiments_rates_series_and_comparison(
    atlas_ddm: Client, world: dict[str, Any]
) -> None:
    assert [row["experiment"] for row in atlas_ddm.get("/results/tc/", {"format": "json"}).json()["rows"]] == ["ATLAS"]
    cms_target = world["targets"]["cms-tc"]
    assert atlas_ddm.get(f"/results/tc/targets/{cms_target.pk}/", {"format": "json"}).status_code == 404
    compared = atlas_ddm.get("/results/tc/compare/", {"format": "json"}).json()["rows"]
    assert [(row["current"]["experiment"], row["earlier"]["experiment"]) for row in compared] == [("ATLAS", "ATLAS")]
    page = json.dumps(atlas_ddm.get("/results/tc/compare/").context["choices"].experiments)
    assert "CMS" not in page
