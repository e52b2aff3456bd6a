"""A run's own rates over its active window, and the matrix of runs over the time each link was active."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from results.active_rates import transfers_rates
from results.matrix.cells import link_matrix
from results.models import TransferRecord
from tests.results.union import union_seconds
from tests.sites.factories import SiteFactory

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
MB = 10**6


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_seven_second_run_has_an_average_over_its_active_window_and_a_max_over_one_second() -> None:
    rates = transfers_rates(
        [(at(0), at(4), 400 * MB, "ok"), (at(2), at(7), 500 * MB, "ok"), (at(1), at(3), 0, "failed")]
    )
    assert (rates.start, rates.end, rates.active_seconds, rates.volume) == (at(0), at(7), 7.0, 900 * MB)
    assert rates.average_rate == pytest.approx(900 * MB / 7)
    assert (rates.max_window, rates.max_rate) == (1.0, pytest.approx(200 * MB))  # seconds 2-4: both files
    assert rates.max_window_start == at(2)
    assert rates.stable_rate is None and rates.stable_window is None  # under a minute: nothing "sustained"
    assert (rates.files_ok, rates.files_failed) == (2, 1)


def test_a_long_run_has_a_stable_rate_over_half_its_active_time_and_an_hour_at_most_for_the_max() -> None:
    files = [
        (at(hour * 3600), at((hour + 1) * 3600), (100 if hour < 5 else 10) * 3600 * MB, "ok") for hour in range(10)
    ]
    rates = transfers_rates(files)
    assert rates.active_seconds == 36000 and rates.resolution == 2.0  # 20,000 bins at most
    assert rates.max_window == 3600 and rates.max_rate == pytest.approx(100 * MB)
    assert rates.stable_window == 18000 and rates.stable_rate == pytest.approx(100 * MB)
    assert rates.average_rate == pytest.approx(55 * MB)


def test_a_run_that_moved_nothing_has_no_rate() -> None:
    rates = transfers_rates([(at(0), at(5), 0, "failed")])
    assert rates.average_rate is None and rates.max_rate is None and rates.volume == 0


def test_the_union_of_intervals_counts_overlaps_once_and_gaps_not_at_all() -> None:
    assert union_seconds([(at(0), at(4)), (at(2), at(6)), (at(10), at(11)), (at(10.5), at(10.7))]) == 7.0


@pytest.mark.django_db
def test_a_link_that_ran_for_ten_seconds_shows_its_rate_over_those_ten_seconds() -> None:
    a, b, c = SiteFactory(name="LM-A"), SiteFactory(name="LM-B"), SiteFactory(name="LM-C")
    rows = [
        (a, b, 0, 10, 700 * MB, "ok", "", "pull"),
        (a, b, 5, 10, 0, "failed", "SSLException: broken pipe", "pull"),
        (a, c, 0, 4, 40 * MB, "ok", "", "push"),
        (a, c, 6, 10, 40 * MB, "ok", "", "push"),
    ]
    for index, (source, destination, start, end, size, state, error, mode) in enumerate(rows):
        TransferRecord.objects.create(
            source_site=source,
            destination_site=destination,
            start=at(start),
            end=at(end),
            bytes=size,
            state=state,
            error_message=error,
            mode=mode,
            origin="probe",
            origin_id=f"lm-{index}",
        )
    cells = {(cell.source, cell.destination): cell for cell in link_matrix(TransferRecord.objects.all())}
    ab, ac = cells[("LM-A", "LM-B")], cells[("LM-A", "LM-C")]
    assert (ab.rate, ab.active_seconds, ab.files_ok, ab.files_failed) == (70 * MB, 10.0, 1, 1)
    assert ab.failure_ratio == 0.5 and ab.top_error == "SSLException: broken pipe"
    assert ac.active_seconds == 8.0 and ac.rate == 10 * MB  # the 2 s gap is not active time
    assert ac.sum_of_file_rates == pytest.approx(20 * MB)  # 10 MB/s + 10 MB/s, the seed's way
    split = link_matrix(TransferRecord.objects.all(), split=["mode"])
    assert {(cell.destination, cell.mode) for cell in split} == {("LM-B", "pull"), ("LM-C", "push")}


@pytest.mark.django_db
def test_the_matrix_active_time_in_sql_is_the_union_of_the_intervals() -> None:
    import random

    generator = random.Random(7)
    a, b = SiteFactory(name="LM-A"), SiteFactory(name="LM-B")
    intervals = []
    for index in range(300):
        start = generator.uniform(0, 600)
        end = start + generator.choice([0, generator.uniform(0, 3), generator.uniform(0, 40)])
        intervals.append((at(start), at(end)))
        TransferRecord.objects.create(
            source_site=a,
            destination_site=b,
            start=at(start),
            end=at(end),
            bytes=MB,
            state=generator.choice(["ok", "failed"]),
            mode="pull",
            origin="probe",
            origin_id=f"u-{index}",
        )
    [cell] = link_matrix(TransferRecord.objects.all())
    assert cell.active_seconds == pytest.approx(union_seconds(intervals), abs=1e-3)
    assert cell.files_ok + cell.files_failed == 300
