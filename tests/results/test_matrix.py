"""The FROM x TO matrix against hand-computed numbers, its page and exports, and the records list (API and page)
behind its cells."""

from __future__ import annotations

import csv
import io
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from results.matrix.challenge import matrix_for_challenge
from results.models import LinkTotals, TransferRecord
from results.services import record_rows_store, records_store
from results.store.rows import RecordRow
from sites.choices import Role
from sites.models import Experiment, Site
from sites.roles import membership_grant

pytestmark = pytest.mark.django_db

T0 = datetime(2022, 3, 14, tzinfo=UTC)
GB = 1e9
HOUR = 3600.0
_ids = itertools.count()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def world() -> dict[str, Any]:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    cern = Site.objects.create(name="CERN", tier=0, country="CH")
    cnaf = Site.objects.create(name="CNAF", tier=1, country="IT")
    kit = Site.objects.create(name="KIT", tier=1, country="DE")
    challenge = Challenge.objects.create(name="TC", slug="tc", start=at(0), end=at(60))  # one hour
    return {"atlas": atlas, "cms": cms, "cern": cern, "cnaf": cnaf, "kit": kit, "challenge": challenge}


def record(
    world: dict[str, Any],
    *,
    source: str = "cern",
    destination: str = "cnaf",
    start: float = 0,
    end: float = 60,
    size: float = 0,
    state: str = "ok",
    mode: str = "pull",
    concurrency: int | None = None,
    experiment: str = "atlas",
    message: str = "",
) -> TransferRecord:
    return TransferRecord(
        experiment=world[experiment],
        source_site=world[source],
        destination_site=world[destination],
        bytes=int(size),
        start=at(start),
        end=at(end),
        state=state,
        error_message=message,
        mode=mode,
        concurrency=concurrency,
        origin="probe",
        origin_id=f"m{next(_ids)}",
    )


def activities(world: dict[str, Any], *, start: float = 0, end: float = 60) -> None:
    """An ATLAS and a CMS activity of the challenge with targets on the links the records use, so that the records
    count for them (results.store.attribution)."""
    for experiment in ("atlas", "cms"):
        activity = Activity.objects.create(
            challenge=world["challenge"],
            name=f"{experiment} links",
            experiment=world[experiment],
            mode="T1-T1",
            kind="transfer",
            start=at(start),
            end=at(end),
        )
        for source, destination in (("cern", "cnaf"), ("cnaf", "kit"), ("cern", "kit")):
            Target.objects.create(activity=activity, link_from=world[source], link_to=world[destination], rate=GB)


@pytest.fixture
def two_links(world: dict[str, Any]) -> dict[str, Any]:
    """CERN -> CNAF: 1800 GB pull from minute 0 to 59, 360 GB push from 10 to 20, one failed pull from 5 to 6:
    2160 GB over 59 active minutes.
    CNAF -> KIT: 720 GB streamed from minute -10 to 10 (overlapping the activities: it counts, whole).
    A transfer after the activities' hour counts for none of them."""
    activities(world)
    records_store(
        records=[
            record(world, end=59, size=1800 * GB, mode="pull", concurrency=10),
            record(world, start=10, end=20, size=360 * GB, mode="push", concurrency=40),
            record(world, start=5, end=6, size=50 * GB, state="failed", mode="pull", concurrency=10),
            record(world, source="cnaf", destination="kit", start=-10, end=10, size=720 * GB, mode="streamed"),
            record(world, start=70, end=80, size=999 * GB),  # after the challenge: not in it
        ]
    )
    return world


def cells_by_link(result: Any) -> dict[tuple[Any, ...], Any]:
    return {(c.source, c.destination, c.mode, c.concurrency): c for c in result.cells}


def test_the_matrix_gives_each_link_its_rate_over_its_active_time(two_links: dict[str, Any]) -> None:
    result = matrix_for_challenge(challenge=two_links["challenge"])
    cells = cells_by_link(result)
    cern_cnaf = cells[("CERN", "CNAF", None, None)]
    assert cern_cnaf.volume == pytest.approx(2160 * GB)
    assert cern_cnaf.active_seconds == 59 * 60  # the union of 0-59, 10-20 and 5-6
    assert cern_cnaf.average_rate == pytest.approx(2160 * GB / (59 * 60))
    assert cern_cnaf.sum_of_file_rates == pytest.approx(1800 * GB / (59 * 60) + 360 * GB / 600)
    assert (cern_cnaf.files_ok, cern_cnaf.files_failed) == (2, 1)
    assert cern_cnaf.failure_ratio == pytest.approx(1 / 3)
    cnaf_kit = cells[("CNAF", "KIT", None, None)]
    assert (cnaf_kit.volume, cnaf_kit.active_seconds) == (720 * GB, 1200)
    assert cnaf_kit.average_rate == pytest.approx(0.6 * GB)
    assert result.sites == ["CERN", "CNAF", "KIT"]  # both ways: every site as a row and a column
    assert set(cells) == {("CERN", "CNAF", None, None), ("CNAF", "KIT", None, None)}


def test_a_link_that_ran_for_ten_seconds_in_a_week_shows_its_real_rate(world: dict[str, Any]) -> None:
    challenge = world["challenge"]
    challenge.end = challenge.start + timedelta(days=7)
    challenge.save()
    activities(world, end=7 * 24 * 60)
    records_store(records=[record(world, start=100, end=100 + 10 / 60, size=700 * 10**6)])
    [cell] = matrix_for_challenge(challenge=challenge).cells
    assert cell.average_rate == pytest.approx(70 * 10**6)  # 70 MB/s, not 700 MB over a week
    assert cell.active_seconds == pytest.approx(10)


def test_the_matrix_selects_one_mode(two_links: dict[str, Any]) -> None:
    result = matrix_for_challenge(challenge=two_links["challenge"], mode="push")
    (cell,) = result.cells
    assert (cell.source, cell.destination, cell.mode) == ("CERN", "CNAF", "push")
    assert cell.average_rate == pytest.approx(360 * GB / 600)
    assert (cell.files_ok, cell.files_failed) == (1, 0)
    assert result.modes == ["pull", "push", "streamed"]  # what the selector offers
    assert result.concurrencies == [10, 40]


def test_the_matrix_splits_by_mode_and_concurrency(two_links: dict[str, Any]) -> None:
    cells = cells_by_link(matrix_for_challenge(challenge=two_links["challenge"], split=["mode", "concurrency"]))
    assert set(cells) == {("CERN", "CNAF", "pull", 10), ("CERN", "CNAF", "push", 40), ("CNAF", "KIT", "streamed", None)}
    pull = cells[("CERN", "CNAF", "pull", 10)]
    assert pull.average_rate == pytest.approx(1800 * GB / (59 * 60))
    assert (pull.files_ok, pull.files_failed) == (1, 1)


def test_the_matrix_selects_one_concurrency_and_one_experiment(two_links: dict[str, Any]) -> None:
    records_store(records=[record(two_links, size=3600 * GB, experiment="cms", concurrency=40)])
    only_40 = matrix_for_challenge(challenge=two_links["challenge"], concurrency=40)
    assert cells_by_link(only_40)[("CERN", "CNAF", None, 40)].volume == pytest.approx((360 + 3600) * GB)
    atlas_40 = matrix_for_challenge(
        challenge=two_links["challenge"], concurrency=40, experiment_ids=[two_links["atlas"].pk]
    )
    assert cells_by_link(atlas_40)[("CERN", "CNAF", None, 40)].volume == pytest.approx(360 * GB)


def test_another_challenges_traffic_on_the_same_link_is_not_in_the_matrix(two_links: dict[str, Any]) -> None:
    other = Challenge.objects.create(name="Other", slug="other", start=at(0), end=at(60))
    activity = Activity.objects.create(
        challenge=other,
        name="other export",
        experiment=two_links["atlas"],
        mode="T0 export",
        kind="transfer",
        start=at(0),
        end=at(60),
        ddm_activities=["Other"],
    )
    Target.objects.create(activity=activity, link_from=two_links["cern"], link_to=two_links["cnaf"], rate=GB)
    row = RecordRow(
        experiment_id=two_links["atlas"].pk,
        source_site_id=two_links["cern"].pk,
        destination_site_id=two_links["cnaf"].pk,
        bytes=int(500 * GB),
        start=at(30),
        end=at(31),
        state="ok",
        origin="fts",
        origin_id="other-1",
        ddm_activity="Other",
    )
    record_rows_store(rows=[row])
    ours = cells_by_link(matrix_for_challenge(challenge=two_links["challenge"]))[("CERN", "CNAF", None, None)]
    assert ours.volume == pytest.approx(2160 * GB)
    [theirs] = matrix_for_challenge(challenge=other).cells
    assert theirs.volume == pytest.approx(500 * GB)


def test_the_matrix_reads_the_records_in_one_query(two_links: dict[str, Any], django_assert_num_queries: Any) -> None:
    cache.clear()
    # the activities; the rollup versions; the transfers counted (hourly rollup) and those the stored unions hold;
    # the cells from the unions with the site names, in a savepoint that gives the query its work_mem (SAVEPOINT,
    # SET LOCAL, the query, RELEASE); the modes on offer
    with django_assert_num_queries(8):
        matrix_for_challenge(challenge=two_links["challenge"], split=["mode"])


def test_a_cached_matrix_skips_the_records_until_a_record_arrives(
    two_links: dict[str, Any], django_assert_num_queries: Any
) -> None:
    challenge = two_links["challenge"]
    before = cells_by_link(matrix_for_challenge(challenge=challenge))[("CERN", "CNAF", None, None)]
    with django_assert_num_queries(2):  # the activities and the versions: the cells come from the cache
        cached = cells_by_link(matrix_for_challenge(challenge=challenge))[("CERN", "CNAF", None, None)]
    assert (cached.volume, cached.files_ok, cached.files_failed) == (before.volume, before.files_ok, 1)
    records_store(records=[record(two_links, start=30, end=40, size=600 * GB, mode="push", concurrency=40)])
    after = cells_by_link(matrix_for_challenge(challenge=challenge))[("CERN", "CNAF", None, None)]
    assert after.volume == pytest.approx(before.volume + 600 * GB)
    assert after.files_ok == before.files_ok + 1


def test_the_matrix_of_one_experiment_is_cached_apart_from_the_whole(two_links: dict[str, Any]) -> None:
    challenge = two_links["challenge"]
    records_store(records=[record(two_links, destination="kit", size=60 * GB, experiment="cms")])
    assert len(matrix_for_challenge(challenge=challenge).cells) == 3  # cached for all experiments
    cms_only = matrix_for_challenge(challenge=challenge, experiment_ids=[two_links["cms"].id])
    assert [(cell.source, cell.destination, cell.volume) for cell in cms_only.cells] == [("CERN", "KIT", 60 * GB)]


# --- the page -------------------------------------------------------------------------------------------------


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(get_user_model().objects.create_user("viewer"))
    return client


def test_the_matrix_page_shows_gb_per_s_and_the_failure_ratio(viewer: Client, two_links: dict[str, Any]) -> None:
    response = viewer.get("/results/tc/matrix/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "0.61 GB/s" in text and "33.3% failed" in text
    assert 'id="heatmap-figure"' in text and "/challenges/plotly.min.js" in text
    figure = json.loads(text.split('id="heatmap-figure" type="application/json">')[1].split("</script>")[0])
    assert figure["data"][0]["type"] == "heatmap"
    assert figure["data"][0]["z"][0][1] == pytest.approx(2160 / (59 * 60))  # CERN row, CNAF column, GB/s


def test_a_matrix_cell_links_to_the_records_behind_it(viewer: Client, two_links: dict[str, Any]) -> None:
    text = viewer.get("/results/tc/matrix/?mode=pull&concurrency=10").content.decode()
    href = next(part.split('"')[0] for part in text.split('href="') if part.startswith("/results/tc/records/?"))
    query = parse_qs(urlparse(href.replace("&amp;", "&")).query)
    assert query == {"source": ["CERN"], "destination": ["CNAF"], "mode": ["pull"], "concurrency": ["10"]}
    response = viewer.get(href.replace("&amp;", "&") + "&format=json")
    records = json.loads(b"".join(response.streaming_content))["rows"]  # type: ignore[attr-defined]
    assert sorted((r["bytes"], r["state"]) for r in records) == [(50 * GB, "failed"), (1800 * GB, "ok")]


def test_the_matrix_exports_csv_and_json_split_by_mode(viewer: Client, two_links: dict[str, Any]) -> None:
    rows = viewer.get("/results/tc/matrix/", {"format": "json", "split": "mode"}).json()["rows"]
    push = next(row for row in rows if row["mode"] == "push")
    assert push["average_rate"] == pytest.approx(0.6 * GB)
    assert (push["active_seconds"], push["runs"], push["top_error"]) == (600, 0, "")
    lines = list(csv.reader(io.StringIO(viewer.get("/results/tc/matrix/", {"format": "csv"}).content.decode())))
    assert lines[0][:5] == ["source", "destination", "mode", "concurrency", "average_rate"]
    assert len(lines) == 3


def test_the_matrix_page_takes_a_bounded_number_of_queries(
    viewer: Client, two_links: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    # session, user, challenge, activities, rollup versions, transfers counted, cells (not cached yet; 4 with their
    # savepoint and work_mem), modes on offer, memberships, site reports, experiments
    with django_assert_max_num_queries(14):
        assert viewer.get("/results/tc/matrix/").status_code == 200


def test_the_records_page_filters_and_streams_csv(viewer: Client, two_links: dict[str, Any]) -> None:
    page = viewer.get("/results/tc/records/", {"state": "failed"})
    assert page.status_code == 200 and page.context["records"][0].bytes == 50 * GB
    response = viewer.get("/results/tc/records/", {"source": "CERN", "format": "csv"})
    assert response.streaming
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))  # type: ignore[attr-defined]
    assert lines[0][:4] == ["id", "experiment", "source", "destination"]
    assert len(lines) == 1 + 3  # the record after the challenge is not in it


# --- the records API ------------------------------------------------------------------------------------------


def api(role: str, experiment: Experiment | None = None) -> APIClient:
    user = get_user_model().objects.create_user(f"{role}-{experiment}")
    membership_grant(user=user, role=Role(role), experiment=experiment if role == "ddm" else None)
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_records_api_filters_by_challenge_link_mode_and_state(two_links: dict[str, Any]) -> None:
    client = api("viewer")
    body = client.get("/api/v1/records/", {"challenge": "tc", "source": "CERN", "mode": "pull"}).json()
    assert [(r["bytes"], r["state"]) for r in body["results"]] == [(1800 * GB, "ok"), (50 * GB, "failed")]
    assert body["results"][0]["rate"] == pytest.approx(1800 * GB / (59 * 60))
    failed = client.get("/api/v1/records/", {"challenge": "tc", "state": "failed"}).json()
    assert len(failed["results"]) == 1
    assert len(client.get("/api/v1/records/", {"destination": "KIT"}).json()["results"]) == 1


def test_the_records_api_selects_no_record_of_an_unknown_challenge(two_links: dict[str, Any]) -> None:
    # A filter value that names nothing selects nothing, as the schema documents (docs/api.md): not a 400.
    response = api("viewer").get("/api/v1/records/", {"challenge": "nope"})
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_the_records_api_pages_in_a_stable_order(world: dict[str, Any]) -> None:
    records_store(records=[record(world, start=1, end=2, size=i) for i in range(5)])  # same start: id decides
    client = api("viewer")
    first = client.get("/api/v1/records/", {"limit": 2}).json()
    second = client.get(first["next"]).json()
    third = client.get(second["next"]).json()
    ids = [r["id"] for r in first["results"] + second["results"] + third["results"]]
    assert ids == sorted(ids) and len(set(ids)) == 5 and third["next"] is None
    assert client.get("/api/v1/records/", {"limit": 100000}).status_code == 200  # capped, not refused


def test_a_ddm_service_reads_only_its_experiments_records(two_links: dict[str, Any]) -> None:
    records_store(records=[record(two_links, size=1 * GB, experiment="cms")])
    cms = api("ddm", two_links["cms"]).get("/api/v1/records/").json()
    assert [r["experiment"] for r in cms["results"]] == ["CMS"]
    assert len(api("viewer").get("/api/v1/records/").json()["results"]) == 6


def test_the_records_api_takes_a_bounded_number_of_queries(
    two_links: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    client = api("viewer")
    with django_assert_max_num_queries(4):  # memberships, challenge, page (sites joined)
        assert len(client.get("/api/v1/records/", {"challenge": "tc"}).json()["results"]) == 4


def test_the_matrix_page_splits_into_one_table_per_mode(viewer: Client, two_links: dict[str, Any]) -> None:
    text = viewer.get("/results/tc/matrix/", {"split": "mode"}).content.decode()
    assert text.count('<table class="matrix">') == 3  # pull, push, streamed
    assert "<h2>pull</h2>" in text and "<h2>push</h2>" in text and "<h2>streamed</h2>" in text
    assert "selected>one per mode" in text


def test_a_large_challenge_without_its_unions_counts_active_time_to_the_minute(
    two_links: dict[str, Any], viewer: Client, settings: Any
) -> None:
    settings.RESULTS_MATRIX_EXACT_LIMIT = 3  # the two links' 4 transfers are "many"
    LinkTotals.objects.all().delete()  # as records bulk-loaded without link_intervals_rebuild leave them
    result = matrix_for_challenge(challenge=two_links["challenge"])
    assert (result.resolution, result.transfers) == ("minute", 4)
    cern_cnaf = cells_by_link(result)[("CERN", "CNAF", None, None)]
    assert cern_cnaf.volume == pytest.approx(2160 * GB)  # exact: the rollup's sums
    assert (cern_cnaf.files_ok, cern_cnaf.files_failed) == (2, 1)
    assert cern_cnaf.active_seconds == 60 * 60  # minutes 0 to 58 moved data, the pull ended in minute 59
    assert cern_cnaf.sum_of_file_rates is None and cern_cnaf.runs == set()
    split = cells_by_link(matrix_for_challenge(challenge=two_links["challenge"], split=["mode"]))
    assert split[("CERN", "CNAF", "push", None)].active_seconds == 11 * 60  # 10-19 moving, 20 its end (exact: 600)
    text = viewer.get("/results/tc/matrix/").content.decode()
    assert 'data-resolution="minute"' in text and "counted to the minute" in text


def test_the_matrix_page_and_its_json_say_which_resolution_they_show(two_links: dict[str, Any], viewer: Client) -> None:
    assert 'data-resolution="unions"' in viewer.get("/results/tc/matrix/").content.decode()
    response = viewer.get("/results/tc/matrix/", {"format": "json", "resolution": "minute"})
    assert (response.json()["resolution"], response["X-Matrix-Resolution"]) == ("minute", "minute")
    assert viewer.get("/results/tc/matrix/", {"format": "json", "resolution": "records"}).json()["resolution"] == (
        "records"
    )
    assert 'data-resolution="records"' in viewer.get("/results/tc/matrix/?resolution=records").content.decode()
