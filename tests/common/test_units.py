"""Durations and windows as people read them (common.units): two names, two shapes."""

from __future__ import annotations

import pytest

from common.units import duration_text, window_text


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "—"), (44.6, "45 s"), (200, "3 min 20 s"), (7500, "2 h 05 min"), (-3, "0 s")]
)
def test_a_duration_reads_in_hours_minutes_and_seconds(seconds: float | None, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [(18000, "5 h"), (5400, "90 min"), (45, "45 s"), (3601, "3601 s")])
def test_a_window_reads_in_its_largest_whole_unit(seconds: int, text: str) -> None:
    assert window_text(seconds) == text
