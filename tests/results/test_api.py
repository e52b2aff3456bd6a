"""The rates API: one row per target with numbers computed by hand, its filters, a DDM token's scope, 404s and
the schema."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
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
ROW_KEYS = {
    "id",
    "url",
    "kind",
    "site",
    "link",
    "window_start",
    "window_end",
    "at",
    "measured_by",
    "last_15min_rate",
    "last_hour_rate",
    "required_rate",
    "projected_average_rate",
    "network",
    "window_ended",
    "runs_outside_window",
    "so_far",
    "activity",
    "experiment",
    "mode",
    "direction",
    "target_rate",
    "average_rate",
    "max_rate",
    "stable_rate",
    "volume",
    "files_ok",
    "files_failed",
    "failure_ratio",
    "verdict",
}


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def record(
    experiment: Experiment, source: Site, destination: Site, *, start: float, end: float, size: float, state: str = "ok"
) -> TransferRecord:
    return TransferRecord(
        experiment=experiment,
        source_site=source,
        destination_site=destination,
        bytes=int(size),
        start=at(start),
        end=at(end),
        state=state,
        mode="pull",
        origin="probe",
        origin_id=f"api{next(_ids)}",
    )


@pytest.fixture
def world() -> dict[str, Any]:
    """ATLAS runs 10 h into CNAF (target 1 GB/s, achieved a steady 1.5 GB/s, one failed file) and over the link
    CERN -> PIC (target 2 GB/s, achieved 1 GB/s); CMS runs 1 h into CNAF (target 0.5 GB/s, achieved 1 GB/s)."""
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    lhcb = Experiment.objects.create(name="LHCb")
    cern = Site.objects.create(name="CERN", tier=0, country="CH")
    cnaf = Site.objects.create(name="CNAF", tier=1, country="IT")
    pic = Site.objects.create(name="PIC", tier=1, country="ES")
    challenge = Challenge.objects.create(
        name="TC", slug="tc", start=T0, end=T0 + timedelta(days=2), max_window=3600, stable_window=18000
    )
    atlas_dt = Activity.objects.create(
        challenge=challenge, name="atlas-dt", experiment=atlas, mode="DT", kind="transfer", start=at(0), end=at(600)
    )
    cms_dt = Activity.objects.create(
        challenge=challenge, name="cms-dt", experiment=cms, mode="DT", kind="transfer", start=at(0), end=at(60)
    )
    Target.objects.create(activity=atlas_dt, site=cnaf, direction="in", rate=1 * GB)
    Target.objects.create(activity=atlas_dt, link_from=cern, link_to=pic, rate=2 * GB)
    Target.objects.create(activity=cms_dt, site=cnaf, direction="in", rate=0.5 * GB)
    records = [record(atlas, cern, cnaf, start=60 * h, end=60 * h + 60, size=3600 * 1.5 * GB) for h in range(10)]
    records.append(record(atlas, cern, cnaf, start=5, end=6, size=1 * GB, state="failed"))
    records.append(record(atlas, cern, pic, start=0, end=600, size=36000 * GB))
    records.append(record(cms, cern, cnaf, start=0, end=60, size=3600 * GB))
    records_store(records=records)
    return {"challenge": challenge, "atlas": atlas, "cms": cms, "lhcb": lhcb}


def api(role: str, experiment: Experiment | None = None) -> APIClient:
    user = get_user_model().objects.create_user(f"{role}-{experiment}-{next(_ids)}")
    membership_grant(user=user, role=role, experiment=experiment if role == "ddm" else None)
    client = APIClient()
    client.force_authenticate(user)
    return client


def rows(client: APIClient, **params: str) -> list[dict[str, Any]]:
    response = client.get("/api/v1/challenges/tc/rates/", params)
    assert response.status_code == 200, response.content
    result: list[dict[str, Any]] = response.json()["rows"]
    return result


def test_the_rates_give_one_row_per_target_with_the_numbers_computed_by_hand(world: dict[str, Any]) -> None:
    by_place = {(row["experiment"], row.get("site"), str(row.get("link"))): row for row in rows(api("viewer"))}
    atlas_cnaf = by_place[("ATLAS", "CNAF", "None")]
    assert atlas_cnaf["target_rate"] == 1 * GB
    assert atlas_cnaf["average_rate"] == pytest.approx(1.5 * GB)
    assert atlas_cnaf["max_rate"] == pytest.approx(1.5 * GB)
    assert atlas_cnaf["stable_rate"] == pytest.approx(1.5 * GB)
    assert atlas_cnaf["volume"] == pytest.approx(10 * 3600 * 1.5 * GB)
    # The last file ends at B itself: its bytes count, but it did not end inside [A, B).
    assert (atlas_cnaf["files_ok"], atlas_cnaf["files_failed"]) == (9, 1)
    assert atlas_cnaf["failure_ratio"] == pytest.approx(1 / 10)
    assert atlas_cnaf["verdict"] == "met"
    link = by_place[("ATLAS", None, str({"from": "CERN", "to": "PIC"}))]
    assert (link["average_rate"], link["stable_rate"], link["verdict"]) == (
        pytest.approx(1 * GB),
        pytest.approx(1 * GB),
        "missed",
    )
    cms = by_place[("CMS", "CNAF", "None")]
    assert cms["stable_rate"] is None  # 1 h activity, 5 h stable window
    assert (cms["average_rate"], cms["verdict"]) == (pytest.approx(1 * GB), "met")


def test_a_row_has_exactly_the_documented_keys(world: dict[str, Any]) -> None:
    site_row, link_row, _ = rows(api("viewer"), experiment="atlas") + rows(api("viewer"), experiment="cms")
    assert set(site_row) == set(link_row) == ROW_KEYS  # a link's site and a site's link are null
    assert (site_row["link"], link_row["site"]) == (None, None)
    assert link_row["link"] == {"from": "CERN", "to": "PIC"}
    assert site_row["url"] == f"/results/tc/targets/{site_row['id']}/"
    assert (site_row["direction"], link_row["direction"]) == ("in", None)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"experiment": "cms"}, [("CMS", "cms-dt")]),
        ({"activity": "atlas-dt"}, [("ATLAS", "atlas-dt"), ("ATLAS", "atlas-dt")]),
        ({"site": "PIC"}, [("ATLAS", "atlas-dt")]),
        ({"site": "CNAF", "experiment": "ATLAS"}, [("ATLAS", "atlas-dt")]),
        ({"experiment": "LHCb"}, []),
    ],
)
def test_the_rates_filter_by_experiment_activity_and_site(
    world: dict[str, Any], params: dict[str, str], expected: list[tuple[str, str]]
) -> None:
    assert sorted((row["experiment"], row["activity"]) for row in rows(api("viewer"), **params)) == expected


def test_a_ddm_token_reads_only_the_rows_of_its_own_experiment(world: dict[str, Any]) -> None:
    user = get_user_model().objects.create_user("cms-injector")
    membership = membership_grant(user=user, role="ddm", experiment=world["cms"])
    _, key = token_create(user=user, membership=membership)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert [row["experiment"] for row in rows(client)] == ["CMS"]
    assert rows(client, experiment="ATLAS") == []


def test_a_challenge_without_the_ddm_services_experiment_is_not_found_for_it(world: dict[str, Any]) -> None:
    assert api("ddm", world["lhcb"]).get("/api/v1/challenges/tc/rates/").status_code == 404


def test_an_unknown_challenge_is_not_found(world: dict[str, Any]) -> None:
    response = api("viewer").get("/api/v1/challenges/nope/rates/")
    assert response.status_code == 404
    assert "detail" in response.json()


def test_anonymous_callers_are_refused(world: dict[str, Any]) -> None:
    assert APIClient().get("/api/v1/challenges/tc/rates/").status_code == 401


def test_the_rates_take_a_bounded_number_of_queries(world: dict[str, Any], django_assert_max_num_queries: Any) -> None:
    client = api("viewer")
    # membership, challenge, targets, rollup versions, one rollup query for all the targets (windows on minute
    # boundaries: no raw records), however many targets, and one for the runs outside the windows; the second call
    # takes the rows from the cache
    with django_assert_max_num_queries(6):
        first = rows(client)
    with django_assert_max_num_queries(5):
        assert rows(client) == first


def test_the_schema_with_the_rates_builds_without_warnings(tmp_path: Path) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    schema = (tmp_path / "schema.yaml").read_text()
    assert "/api/v1/challenges/{slug}/rates/" in schema
    assert "RateRowLink" in schema
