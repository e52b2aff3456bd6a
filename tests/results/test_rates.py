"""The rate definitions, each against numbers computed by hand."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from challenges.models import Activity, Challenge, Target
from results.models import RateRollup, TransferRecord
from results.rates import rates_for_challenge, target_rates
from results.rollups import rollups_rebuild, spread
from results.services import records_store
from sites.models import Experiment, Site

pytestmark = pytest.mark.django_db

T0 = datetime(2022, 3, 14, tzinfo=UTC)
GB = 1e9
_ids = itertools.count()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def world() -> dict[str, Any]:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    cern, cnaf = (
        Site.objects.create(name="CERN", tier=0, country="CH"),
        Site.objects.create(name="CNAF", tier=1, country="IT"),
    )
    for site in (cern, cnaf):
        site.experiments.set([atlas, cms])
    challenge = Challenge.objects.create(
        name="TC",
        slug="tc",
        start=T0 - timedelta(days=1),
        end=T0 + timedelta(days=2),
        max_window=3600,
        stable_window=18000,
    )
    return {"atlas": atlas, "cms": cms, "cern": cern, "cnaf": cnaf, "challenge": challenge}


def target(
    world: dict[str, Any],
    *,
    start: datetime,
    end: datetime,
    rate: float = 1 * GB,
    experiment: str = "atlas",
    direction: str = "in",
) -> Target:
    activity = Activity.objects.create(
        challenge=world["challenge"],
        name=f"a{next(_ids)}",
        experiment=world[experiment],
        mode="DT",
        kind="transfer",
        start=start,
        end=end,
    )
    return Target.objects.create(activity=activity, site=world["cnaf"], direction=direction, rate=rate)


def record(
    world: dict[str, Any], *, start: datetime, end: datetime, size: float, state: str = "ok", experiment: str = "atlas"
) -> TransferRecord:
    return TransferRecord(
        experiment=world[experiment],
        source_site=world["cern"],
        destination_site=world["cnaf"],
        bytes=int(size),
        start=start,
        end=end,
        state=state,
        mode="pull",
        origin="probe",
        origin_id=f"r{next(_ids)}",
    )


def rates(world: dict[str, Any], the_target: Target) -> Any:
    challenge = world["challenge"]
    return target_rates(target=the_target, max_window=challenge.max_window, stable_window=challenge.stable_window)


def test_bytes_are_spread_over_the_real_start_and_end() -> None:
    parts = spread(start=at(0.5), end=at(2.5), size=120)  # 120 bytes over 120 s: 30 + 60 + 30
    assert parts == [(at(0), 30.0), (at(1), 60.0), (at(2), 30.0)]


def test_a_transfer_straddling_the_window_edge_counts_only_its_part_inside(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(60), end=at(120))
    # 600 s transfer of 600 GB, half of it before the window opens: 300 GB inside.
    records_store(records=[record(world, start=at(55), end=at(65), size=600 * GB)])
    result = rates(world, the_target)
    assert result.volume == pytest.approx(300 * GB)
    assert result.average_rate == pytest.approx(300 * GB / 3600)
    assert result.files_ok == 1  # it ended inside the window


def test_an_unaligned_window_counts_the_partial_minutes_exactly(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(10.5), end=at(20.25))
    records_store(records=[record(world, start=at(10), end=at(21), size=660)])  # 1 byte per second
    result = rates(world, the_target)
    assert result.volume == pytest.approx((20.25 - 10.5) * 60)


def test_a_failed_transfer_adds_no_bytes_but_counts_as_a_failure(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(0), end=at(60))
    records_store(
        records=[
            record(world, start=at(1), end=at(2), size=10 * GB, state="failed"),
            record(world, start=at(1), end=at(2), size=3 * GB),
            record(world, start=at(3), end=at(4), size=1 * GB, state="cancelled"),
        ]
    )
    result = rates(world, the_target)
    assert result.volume == pytest.approx(3 * GB)
    assert (result.files_ok, result.files_failed, result.failure_ratio) == (1, 1, 0.5)


def test_a_burst_shorter_than_the_stable_window_raises_max_but_not_stable(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(0), end=at(600), rate=2 * GB)  # 10 h activity, 5 h stable window
    steady = [record(world, start=at(minute), end=at(minute + 1), size=60 * GB) for minute in range(600)]  # 1 GB/s
    burst = [record(world, start=at(100), end=at(160), size=3600 * 4 * GB)]  # +4 GB/s for one hour
    records_store(records=steady + burst)
    result = rates(world, the_target)
    assert result.max_rate == pytest.approx(5 * GB)
    assert result.max_window_start == at(100)
    assert result.stable_rate == pytest.approx((5 * 3600 * GB + 4 * 3600 * GB) / 18000)  # 1.8 GB/s
    assert result.average_rate == pytest.approx((600 * 60 * GB + 4 * 3600 * GB) / 36000)  # 1.4 GB/s
    assert result.verdict == "partly"  # max >= 2 GB/s > stable


def test_an_activity_shorter_than_the_stable_window_has_no_stable_rate(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(0), end=at(30), rate=0.5 * GB)
    records_store(records=[record(world, start=at(0), end=at(30), size=1800 * GB)])
    result = rates(world, the_target)
    assert result.stable_rate is None
    assert result.max_rate == pytest.approx(result.average_rate) == pytest.approx(1 * GB)  # shorter than max_window
    assert result.verdict == "met"  # the average stands in for the stable rate


def test_two_experiments_at_one_site_are_counted_apart(world: dict[str, Any]) -> None:
    atlas_target = target(world, start=at(0), end=at(60))
    cms_target = target(world, start=at(0), end=at(60), experiment="cms")
    records_store(
        records=[
            record(world, start=at(0), end=at(60), size=3600 * GB),
            record(world, start=at(0), end=at(60), size=1800 * GB, experiment="cms"),
        ]
    )
    assert rates(world, atlas_target).average_rate == pytest.approx(1 * GB)
    assert rates(world, cms_target).average_rate == pytest.approx(0.5 * GB)


def test_the_out_direction_counts_transfers_leaving_the_site(world: dict[str, Any]) -> None:
    out = target(world, start=at(0), end=at(60), direction="out")
    records_store(records=[record(world, start=at(0), end=at(60), size=3600 * GB)])  # CERN -> CNAF: into CNAF
    assert rates(world, out).volume == 0


def test_a_record_stored_twice_is_counted_once(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(0), end=at(60))
    first = record(world, start=at(0), end=at(60), size=3600 * GB)
    again = TransferRecord(
        **{f.attname: getattr(first, f.attname) for f in TransferRecord._meta.concrete_fields if f.attname != "id"}
    )
    assert records_store(records=[first]).stored == 1
    summary = records_store(records=[again, again])
    assert (summary.stored, summary.duplicates) == (0, 2)
    assert rates(world, the_target).average_rate == pytest.approx(1 * GB)


def test_the_sql_rebuild_gives_the_same_rollup_as_the_incremental_one(world: dict[str, Any]) -> None:
    records_store(
        records=[
            record(
                world,
                start=at(i * 0.7),
                end=at(i * 0.7 + i % 5),
                size=1e6 * (i + 1),
                state="failed" if i % 7 == 0 else "ok",
            )
            for i in range(60)
        ]
    )
    incremental = sorted((r.minute, round(r.bytes, 3), r.files_ok, r.files_failed) for r in RateRollup.objects.all())
    rollups_rebuild()
    rebuilt = sorted((r.minute, round(r.bytes, 3), r.files_ok, r.files_failed) for r in RateRollup.objects.all())
    assert rebuilt == incremental


@pytest.mark.parametrize(
    ("stable", "peak", "average", "verdict"),
    [(2.0, 3.0, 1.0, "met"), (1.0, 2.0, 1.0, "partly"), (1.0, 1.5, 1.0, "missed")],
)
def test_the_verdict_rules(world: dict[str, Any], stable: float, peak: float, average: float, verdict: str) -> None:
    result = rates(world, target(world, start=at(0), end=at(600), rate=2 * GB))
    result.stable_rate, result.max_rate, result.average_rate = stable * GB, peak * GB, average * GB
    assert result.verdict == verdict


def test_the_rates_of_a_challenge_take_a_bounded_number_of_queries(
    world: dict[str, Any], django_assert_max_num_queries: Any
) -> None:
    for _ in range(5):
        target(world, start=at(0), end=at(600))
    with django_assert_max_num_queries(1 + 5):
        assert len(rates_for_challenge(challenge=world["challenge"])) == 5


def test_storing_a_failed_record_gives_it_a_failure_category(world: dict[str, Any]) -> None:
    failed = record(world, start=at(0), end=at(1), size=1, state="failed")
    failed.error_message = "Connection timed out after 300 seconds"
    records_store(records=[failed])
    assert TransferRecord.objects.get(origin_id=failed.origin_id).error_category == "timeout"
