"""The rate definitions, each against numbers computed by hand."""

from __future__ import annotations

import io
import itertools
import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from challenges.models import Activity, Challenge, Target
from results.models import RateRollup, RollupVersion, TransferRecord
from results.services import records_store
from results.store.rollups import rollups_rebuild
from results.targets.rates import rates_for_challenge, target_rates
from sites.models import Experiment, Site

from .rollup_rows import rollup_rows

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


def test_bytes_are_spread_over_the_real_start_and_end(world: dict[str, Any]) -> None:
    records_store(records=[record(world, start=at(0.5), end=at(2.5), size=120)])  # 120 B over 120 s: 30 + 60 + 30
    parts = RateRollup.objects.order_by("minute").values_list("minute", "bytes")
    assert list(parts) == [(at(0), 30.0), (at(1), 60.0), (at(2), 30.0)]


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


@pytest.mark.parametrize(("target_rate", "verdict"), [(1.5 * GB, "partly"), (0.9 * GB, "met")])
def test_without_a_stable_rate_the_average_stands_in_for_it(
    world: dict[str, Any], target_rate: float, verdict: str
) -> None:
    # 2 h activity (longer than the 1 h max window, shorter than the 5 h stable window): 2 GB/s in the first hour,
    # nothing in the second. By hand: average 7200 GB / 7200 s = 1 GB/s, max 7200 GB / 3600 s = 2 GB/s, no stable.
    # Target 1.5 GB/s: average < target <= max -> partly. Target 0.9 GB/s: average >= target -> met.
    the_target = target(world, start=at(0), end=at(120), rate=target_rate)
    records_store(records=[record(world, start=at(m), end=at(m + 1), size=120 * GB) for m in range(60)])
    result = rates(world, the_target)
    assert result.stable_rate is None
    assert (result.average_rate, result.max_rate) == pytest.approx((1 * GB, 2 * GB))
    assert result.verdict == verdict


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


def test_the_same_file_reported_by_two_origins_with_one_transfer_key_is_counted_once(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(0), end=at(60))
    by_fts = record(world, start=at(0), end=at(60), size=3600 * GB)
    by_fts.origin, by_fts.transfer_key = "fts", "rucio-request-1/fts-job-1"
    by_rucio = record(world, start=at(0), end=at(60), size=3600 * GB)
    by_rucio.origin, by_rucio.transfer_key = "rucio", "rucio-request-1/fts-job-1"
    assert records_store(records=[by_fts]).stored == 1
    summary = records_store(records=[by_rucio])
    assert (summary.stored, summary.duplicates) == (0, 1)
    within = [record(world, start=at(0), end=at(1), size=1, experiment="cms") for _ in range(2)]
    for item in within:
        item.transfer_key = "same-key"
    assert records_store(records=within).stored == 1
    assert rates(world, the_target).average_rate == pytest.approx(1 * GB)


def test_every_write_of_the_rollups_raises_the_version_of_its_experiments(world: dict[str, Any]) -> None:
    def versions() -> dict[int, int]:
        return dict(RollupVersion.objects.values_list("experiment_id", "version"))

    records_store(records=[record(world, start=at(0), end=at(1), size=GB)])
    assert versions() == {world["atlas"].id: 1}
    records_store(records=[record(world, start=at(0), end=at(1), size=GB, experiment="cms")])
    assert versions() == {world["atlas"].id: 1, world["cms"].id: 1}
    rollups_rebuild()
    assert versions() == {world["atlas"].id: 2, world["cms"].id: 2}


def test_hosts_are_taken_from_the_urls(world: dict[str, Any]) -> None:
    item = record(world, start=at(0), end=at(1), size=GB)
    item.source_url, item.destination_url = "davs://EOS.cern.ch:443/x", "root://xrootd.cnaf.infn.it//y"
    records_store(records=[item])
    stored = TransferRecord.objects.get()
    assert (stored.source_host, stored.destination_host) == ("eos.cern.ch", "xrootd.cnaf.infn.it")


def rollup_tables() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the rollups, bytes rounded (sums in another order differ in the last bits)."""
    return {name: [(*row[:-3], round(row[-3], 3), *row[-2:]) for row in rows] for name, rows in rollup_rows().items()}


COUNTS = ("bytes", "files_ok", "files_failed")


def test_the_sql_rebuild_gives_the_same_rollups_as_the_incremental_ones(world: dict[str, Any]) -> None:
    records = []
    for i in range(60):
        item = record(
            world,
            start=at(i * 0.7),
            end=at(i * 0.7 + i % 5),  # some instantaneous
            size=1e6 * (i + 1),
            state=("failed", "ok", "ok", "cancelled")[i % 4] if i % 7 == 0 else "ok",
            experiment=("atlas", "cms")[i % 2],
        )
        item.concurrency = (None, 10, 40)[i % 3]
        if i % 5 == 1:  # records of unknown sites or of no experiment count only where they are known
            item.source_site = None
        elif i % 5 == 2:
            item.destination_site = None
        elif i % 11 == 3:
            item.experiment = None
        elif i % 13 == 4:
            item.source_site = item.destination_site  # in and out of one site
        records.append(item)
    again = TransferRecord(
        **{f.attname: getattr(records[0], f.attname) for f in TransferRecord._meta.concrete_fields if f.attname != "id"}
    )
    records_store(records=records[:30])
    # Two batches: the second adds to rows the first wrote, and a duplicate in it adds nothing.
    assert records_store(records=[*records[30:], again]).duplicates == 1
    incremental = rollup_tables()
    assert all(incremental.values())
    rollups_rebuild()
    assert rollup_tables() == incremental


def rollup_indexes() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid IN ('results_raterollup'::regclass, 'results_raterolluphour'::regclass, "
            "'results_flowrollup'::regclass) ORDER BY 1"
        )
        return cursor.fetchall()


def test_the_rebuild_sets_the_indexes_aside_and_makes_them_again(world: dict[str, Any]) -> None:
    before = rollup_indexes()
    assert len(before) >= 8  # the primary keys, the unique keys, the minute rollup's indexes by experiment and site
    records_store(records=[record(world, start=at(0), end=at(3), size=GB)])
    incremental = rollup_tables()
    out = io.StringIO()
    call_command("rollups_rebuild", stdout=out)  # the operator's command
    # 3 minutes of bytes, and the minute it ended holds its file
    assert re.fullmatch(r"4 minute rows stored in \d+\.\d s\n", out.getvalue())
    assert rollup_indexes() == before
    assert rollup_tables() == incremental
    # the unique keys are constraints again: a second row of a key is refused
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO results_raterollup (minute, experiment_id, activity_id, source_site_id, destination_site_id, "
            "mode, concurrency, bytes, files_ok, files_failed) SELECT minute, experiment_id, activity_id, "
            "source_site_id, destination_site_id, mode, concurrency, 0, 0, 0 FROM results_raterollup LIMIT 1"
        )


def test_the_rebuild_makes_the_flow_hours_day_by_day_across_midnights(world: dict[str, Any]) -> None:
    day = 24 * 60
    records_store(
        records=[
            record(world, start=at(-90), end=at(30), size=GB),  # over T0's midnight, into the hour after it
            record(world, start=at(day - 1.5), end=at(day + 0.5), size=2 * GB, experiment="cms"),
            record(world, start=at(3 * day + 59), end=at(3 * day + 61), size=GB),  # days later, over an hour
            record(world, start=at(5 * day), end=at(5 * day), size=GB),  # instantaneous, on a midnight
        ]
    )
    incremental = rollup_tables()
    days = {row[0].date() for row in incremental["flow"]}  # its minutes fall on five UTC days
    assert days == {(T0 + timedelta(days=n)).date() for n in (-1, 0, 1, 3, 5)}
    rollups_rebuild()
    assert rollup_tables() == incremental


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


# --- computed in one query, and cached while the rollups do not change ----------------------------------------


def reference(world: dict[str, Any], the_target: Target, width: int) -> tuple[float, datetime]:
    """The best window of `width` minutes by brute force over the per-minute rollup (empty minutes as 0)."""
    activity = the_target.activity
    minutes = int((activity.end - activity.start) / timedelta(minutes=1))
    moved = [0.0] * minutes
    for row in RateRollup.objects.filter(experiment_id=world["atlas"].id, destination_site_id=world["cnaf"].id):
        index = int((row.minute - activity.start) / timedelta(minutes=1))
        if 0 <= index < minutes:
            moved[index] += row.bytes
    sums = [sum(moved[i : i + width]) for i in range(minutes - width + 1)]
    best = max(sums)
    return best / (width * 60), activity.start + timedelta(minutes=sums.index(best))


def assert_best_windows_match_the_reference(world: dict[str, Any], the_target: Target, result: Any) -> None:
    """The max (1 h) and stable (5 h) windows, rate and start, against the brute-force search."""
    for (rate, window_start), width in (
        ((result.max_rate, result.max_window_start), 60),
        ((result.stable_rate, result.stable_window_start), 300),
    ):
        best_rate, best_start = reference(world, the_target, width)
        assert rate == pytest.approx(best_rate)
        assert window_start == best_start


@pytest.mark.parametrize(
    "moving",
    [lambda minute: True, lambda minute: minute % 7 not in (2, 3), lambda minute: 100 <= minute < 400],
    ids=["every-minute", "with-empty-minutes-between", "quiet-first-and-last-minutes"],
)
def test_the_best_windows_match_a_brute_force_search(world: dict[str, Any], moving: Any) -> None:
    the_target = target(world, start=at(0), end=at(480))
    draw = random.Random(7)
    minutes = [minute for minute in range(480) if moving(minute)]
    # Whole GB in whole minutes: every window's sum is exact, so the earliest of equal windows is well defined.
    records_store(records=[record(world, start=at(m), end=at(m + 1), size=draw.randint(1, 1000) * GB) for m in minutes])
    result = rates(world, the_target)
    assert_best_windows_match_the_reference(world, the_target, result)


def test_a_window_of_partial_hours_matches_a_brute_force_sum(world: dict[str, Any]) -> None:
    # 00:25 to 08:05: the flow rollup's first and last hour rows hold minutes outside the window.
    the_target = target(world, start=at(25), end=at(485))
    draw = random.Random(11)
    moved = {minute: draw.randint(1, 1000) * GB for minute in range(0, 540) if minute % 9}
    records_store(records=[record(world, start=at(m), end=at(m + 1), size=size) for m, size in moved.items()])
    failed = [record(world, start=at(m), end=at(m + 1), size=0, state="failed") for m in (3, 24, 25, 300, 484, 485)]
    records_store(records=failed)
    result = rates(world, the_target)
    assert result.volume == pytest.approx(sum(size for minute, size in moved.items() if 25 <= minute < 485))
    # Files count in the minute they end: those ending at 00:25 ... 08:04.
    assert result.files_ok == sum(1 for minute in moved if 25 <= minute + 1 < 485)
    assert result.files_failed == 3  # ended 00:25, 00:26 and 05:01; not 00:04, 08:05 or 08:06
    assert_best_windows_match_the_reference(world, the_target, result)


def challenge_rows(world: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (r.volume, r.average_rate, r.max_rate, r.stable_rate, r.files_ok, r.files_failed)
        for r in rates_for_challenge(challenge=world["challenge"])
    ]


def test_a_second_read_takes_the_rows_from_the_cache(world: dict[str, Any], django_assert_num_queries: Any) -> None:
    for hours in (6, 10):
        target(world, start=at(0), end=at(60 * hours))
    records_store(records=[record(world, start=at(minute), end=at(minute + 2), size=GB) for minute in range(0, 600, 3)])
    with django_assert_num_queries(3):  # the targets, the rollup versions, the rollup of both targets
        first = challenge_rows(world)
    with django_assert_num_queries(2):  # the targets, the rollup versions
        assert challenge_rows(world) == first
    # 1 GB per 3 min; both activities claim the first 6 h, and each file counts once: for the shorter window
    # (results.store.attribution, rule 3), so the 10 h activity has hours 6-10 only.
    assert (first[0][0], first[1][0]) == pytest.approx((120 * GB, 80 * GB))


def test_a_stored_record_is_in_the_next_read(world: dict[str, Any]) -> None:
    target(world, start=at(0), end=at(600))
    records_store(records=[record(world, start=at(0), end=at(60), size=3600 * GB)])
    assert challenge_rows(world)[0][:3] == pytest.approx((3600 * GB, 0.1 * GB, 1 * GB))
    records_store(records=[record(world, start=at(100), end=at(160), size=7200 * GB, state="ok")])
    volume, average, peak, _, files_ok, _ = challenge_rows(world)[0]
    assert (volume, average, peak, files_ok) == pytest.approx((10800 * GB, 0.3 * GB, 2 * GB, 2))


def test_an_edited_target_is_read_afresh(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(0), end=at(600))
    records_store(records=[record(world, start=at(0), end=at(60), size=3600 * GB)])
    assert challenge_rows(world)[0][0] == pytest.approx(3600 * GB)
    the_target.direction = "out"  # CERN -> CNAF leaves CERN, not CNAF
    the_target.save()
    assert challenge_rows(world)[0][0] == 0
    activity = the_target.activity
    the_target.direction, activity.start = "in", at(30)
    the_target.save()
    activity.save()
    assert challenge_rows(world)[0][0] == pytest.approx(1800 * GB)


def test_edited_windows_of_the_challenge_are_read_afresh(world: dict[str, Any]) -> None:
    target(world, start=at(0), end=at(600))
    records_store(records=[record(world, start=at(0), end=at(60), size=3600 * GB)])  # 1 GB/s for an hour
    assert challenge_rows(world)[0][2:4] == pytest.approx((1 * GB, 0.2 * GB))
    challenge = world["challenge"]
    challenge.max_window, challenge.stable_window = 7200, 36000
    challenge.save()
    assert challenge_rows(world)[0][2:4] == pytest.approx((0.5 * GB, 0.1 * GB))


def test_a_new_target_rate_changes_the_verdict_of_a_cached_row(world: dict[str, Any]) -> None:
    the_target = target(world, start=at(0), end=at(600), rate=2 * GB)
    records_store(records=[record(world, start=at(0), end=at(600), size=36000 * GB)])  # 1 GB/s
    assert rates_for_challenge(challenge=world["challenge"])[0].verdict == "missed"
    the_target.rate = 1 * GB
    the_target.save()
    assert rates_for_challenge(challenge=world["challenge"])[0].verdict == "met"


def test_the_rates_are_computed_when_the_cache_is_down(world: dict[str, Any], settings: Any) -> None:
    from common.processes import free_port

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port(47000)}/0",  # nothing listens there
        }
    }  # Django's setting_changed handler replaces the cache connections
    target(world, start=at(0), end=at(600))
    records_store(records=[record(world, start=at(0), end=at(60), size=3600 * GB)])
    assert challenge_rows(world)[0][0] == pytest.approx(3600 * GB)
