"""The figures of one target and the numbers behind them: bins of the per-minute series, the target line, the
stable and max windows at the right times, and the statistics of the throughput samples."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from challenges.models import Target
from results import charts
from results.selectors import default_bin_minutes, rate_series, throughput_stats
from results.targets.rates import TargetRates

T0 = datetime(2022, 3, 14, tzinfo=UTC)
GB = 1e9


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def ten_hours(**fields: Any) -> TargetRates:
    """A 10 h activity with a target of 2 GB/s: 1 GB/s every minute, 5 GB/s from minute 100 to 160."""
    series = [(5 if 100 <= m < 160 else 1) * 60 * GB for m in range(600)]
    rates = TargetRates(target=Target(rate=2 * GB), start=at(0), end=at(600), series=series, series_first=at(0))
    for name, value in fields.items():
        setattr(rates, name, value)
    return rates


def shape(figure: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in figure["layout"]["shapes"] if s.get("name") == name)


def trace(figure: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in figure["data"] if t.get("name") == name)


def test_bins_are_the_mean_rate_of_their_minutes() -> None:
    series = rate_series(rates=ten_hours(), bin_minutes=60)
    assert len(series.rates) == 10
    assert series.starts[1] == at(60) and series.ends[1] == at(120)
    # minutes 60..119: 40 at 1 GB/s and 20 at 5 GB/s
    assert series.rates[1] == pytest.approx((40 * 1 + 20 * 5) / 60 * GB)
    assert series.rates[2] == pytest.approx((40 * 5 + 20 * 1) / 60 * GB)


def test_a_short_last_bin_is_averaged_over_its_own_length() -> None:
    rates = TargetRates(
        target=Target(rate=GB),
        start=at(0),
        end=at(15),
        series=[60 * GB * (m >= 10) for m in range(15)],
        series_first=at(0),
    )
    series = rate_series(rates=rates, bin_minutes=10)
    assert series.rates == [0.0, pytest.approx(1 * GB)]
    assert series.ends[-1] == at(15)


def test_long_activities_are_binned_coarser() -> None:
    assert default_bin_minutes(duration=timedelta(hours=2)) == 1
    assert default_bin_minutes(duration=timedelta(hours=30)) == 10
    assert default_bin_minutes(duration=timedelta(days=7)) == 60


def test_the_rate_plot_draws_the_target_as_a_line_over_the_whole_activity() -> None:
    rates = ten_hours()
    figure = charts.target_rate_figure(
        rates=rates, series=rate_series(rates=rates, bin_minutes=10), stable_window=18000, max_window=3600
    )
    target = trace(figure, "target")
    assert target["x"] == [iso(at(0)), iso(at(600))]
    assert target["y"] == [2.0, 2.0]


def test_the_rate_plot_shades_the_stable_window_where_it_was_found() -> None:
    rates = ten_hours(stable_window_start=at(100), stable_rate=1.8 * GB, max_window_start=at(100), max_rate=5 * GB)
    figure = charts.target_rate_figure(
        rates=rates, series=rate_series(rates=rates, bin_minutes=10), stable_window=18000, max_window=3600
    )
    band = shape(figure, "stable window")
    assert (band["x0"], band["x1"], band["type"]) == (iso(at(100)), iso(at(400)), "rect")
    assert band["fillcolor"] == charts.STABLE
    assert trace(figure, "stable rate")["y"] == [1.8, 1.8]
    peak = shape(figure, "max window")
    assert (peak["x0"], peak["x1"]) == (iso(at(100)), iso(at(160)))
    assert trace(figure, "max rate")["y"] == [5.0, 5.0]


def test_the_rate_plot_has_no_stable_band_without_a_stable_rate() -> None:
    rates = ten_hours(max_window_start=at(100), max_rate=5 * GB)
    figure = charts.target_rate_figure(
        rates=rates, series=rate_series(rates=rates, bin_minutes=10), stable_window=18000, max_window=3600
    )
    assert [s["name"] for s in figure["layout"]["shapes"]] == ["max window"]


def test_the_rate_plot_steps_through_the_bins_in_gb_per_second() -> None:
    rates = ten_hours()
    figure = charts.target_rate_figure(
        rates=rates, series=rate_series(rates=rates, bin_minutes=60), stable_window=18000, max_window=3600
    )
    achieved = trace(figure, "achieved (60-minute means)")
    assert achieved["x"][0] == iso(at(0)) and achieved["x"][-1] == iso(at(600))
    assert achieved["y"][:3] == [1.0, pytest.approx(140 / 60), pytest.approx(220 / 60)]
    assert achieved["line"]["shape"] == "hv"


def test_throughput_statistics_are_min_mean_max_and_the_population_deviation() -> None:
    stats = throughput_stats(samples=[1 * GB, 2 * GB, 3 * GB, 4 * GB])
    assert (stats.count, stats.minimum, stats.mean, stats.maximum) == (4, 1 * GB, 2.5 * GB, 4 * GB)
    assert stats.standard_deviation == pytest.approx(math.sqrt(1.25) * GB)


def test_throughput_statistics_of_no_samples_are_empty() -> None:
    assert throughput_stats(samples=[]).as_dict() == {"count": 0, "min": None, "mean": None, "max": None, "std": None}


def test_the_histogram_counts_the_bins_and_marks_the_mean_and_the_target() -> None:
    series = rate_series(rates=ten_hours(), bin_minutes=10)
    stats = throughput_stats(samples=series.rates)
    figure = charts.throughput_histogram(series=series, stats=stats, target_rate=2 * GB)
    assert sorted(figure["data"][0]["x"]) == sorted(rate / GB for rate in series.rates)
    assert shape(figure, "target")["x0"] == 2.0
    assert shape(figure, "mean")["x0"] == pytest.approx(stats.mean / GB)  # type: ignore[operator]
    assert stats.mean == pytest.approx((540 * 1 + 60 * 5) / 600 * GB)


def test_a_histogram_of_one_sample_draws_one_bin_centred_on_it_in_the_middle_of_its_axis() -> None:
    """Plotly's own bins put 1.2 GB/s in [1, 2), against the axis' edge: one bin a tenth of the value wide, centred
    on it, on an axis from zero to twice the value, or further when the target line is further."""
    rates = TargetRates(target=Target(rate=GB), start=at(0), end=at(10), series=[72 * GB] * 10, series_first=at(0))
    series = rate_series(rates=rates, bin_minutes=10)
    stats = throughput_stats(samples=series.rates)
    figure = charts.throughput_histogram(series=series, stats=stats, target_rate=GB)
    assert figure["data"][0]["x"] == [pytest.approx(1.2)]
    bins = figure["data"][0]["xbins"]
    assert (bins["start"], bins["end"], bins["size"]) == (pytest.approx(1.14), pytest.approx(1.26), pytest.approx(0.12))
    assert figure["layout"]["xaxis"]["range"] == [0, pytest.approx(2.4)]
    far_target = charts.throughput_histogram(series=series, stats=stats, target_rate=4 * GB)
    assert far_target["layout"]["xaxis"]["range"] == [0, pytest.approx(4.2)]  # the target line in sight


def test_a_histogram_of_many_values_keeps_plotlys_own_bins() -> None:
    series = rate_series(rates=ten_hours(), bin_minutes=10)
    figure = charts.throughput_histogram(series=series, stats=throughput_stats(samples=series.rates), target_rate=GB)
    assert "xbins" not in figure["data"][0]
    assert "range" not in figure["layout"]["xaxis"]


def test_one_value_bins_of_zero_are_a_unit_wide() -> None:
    bins = charts.one_value_bins([0.0, 0.0])
    assert bins is not None and bins.xbins == {"start": -0.5, "end": 0.5, "size": 1.0}
    assert charts.one_value_bins([]) is None


def test_the_rate_plot_shades_each_outage_clipped_to_the_activity_with_its_reason_on_hover() -> None:
    outages = [
        charts.OutageWindow(site="CNAF", start=at(-30), end=at(20), reason="pools rebooted"),  # starts before
        charts.OutageWindow(site="CNAF", start=at(300), end=at(330), reason="router firmware"),
        charts.OutageWindow(site="CNAF", start=at(700), end=at(760), reason="after the activity"),
    ]
    rates = ten_hours()
    figure = charts.target_rate_figure(
        rates=rates, series=rate_series(rates=rates, bin_minutes=10), stable_window=18000, max_window=3600,
        outages=outages,
    )  # fmt: skip
    spans = [(s["x0"], s["x1"]) for s in figure["layout"]["shapes"] if s["name"].startswith("outage: ")]
    assert spans == [(iso(at(0)), iso(at(20))), (iso(at(300)), iso(at(330)))]
    assert shape(figure, "outage: router firmware")["yref"] == "paper"
    hover = [t for t in figure["data"] if t.get("legendgroup") == "outages"]
    assert [t["text"][0] for t in hover] == [
        "CNAF outage 2022-03-13 23:30 → 2022-03-14 00:20 UTC: pools rebooted",
        "CNAF outage 2022-03-14 05:00 → 2022-03-14 05:30 UTC: router firmware",
    ]
    # The hover points cover the span, so that the unified hover finds the reason anywhere inside it.
    assert (hover[1]["x"][0], hover[1]["x"][-1]) == (iso(at(300)), iso(at(330)))
    assert all(t["yaxis"] == "y2" for t in hover) and figure["layout"]["yaxis2"]["range"] == [0, 1]


def test_the_rate_plot_has_no_outage_shapes_without_outages() -> None:
    rates = ten_hours()
    figure = charts.target_rate_figure(
        rates=rates, series=rate_series(rates=rates, bin_minutes=10), stable_window=18000, max_window=3600
    )
    assert not [s for s in figure["layout"].get("shapes", []) if s.get("name", "").startswith("outage")]
    assert "yaxis2" not in figure["layout"]
