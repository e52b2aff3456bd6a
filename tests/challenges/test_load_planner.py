"""The site load planner and the clock grid: sums of overlapping targets against capacity, per hour."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from challenges import selectors
from challenges.choices import ActivityKind
from challenges.models import Challenge
from sites.models import Experiment, Site
from tests.challenges.factories import ActivityFactory, ChallengeFactory, TargetFactory
from tests.sites.factories import CapacityFactory, ExperimentFactory, SiteFactory

pytestmark = pytest.mark.django_db


def at(day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(2022, 3, day, hour, minute, tzinfo=UTC)


@pytest.fixture
def experiments() -> dict[str, Experiment]:
    return {name: ExperimentFactory(name=name) for name in ("ATLAS", "CMS", "LHCb")}


@pytest.fixture
def sites(experiments: dict[str, Experiment]) -> dict[str, Site]:
    """CNAF: 1.25 GB/s network, 4 x 300 MB/s drives. CERN: 1.25 GB/s network, unknown tape. BNL: unknown."""
    made = {name: SiteFactory(name=name, experiments=list(experiments.values())) for name in ("CNAF", "CERN", "BNL")}
    CapacityFactory(site=made["CNAF"], network_rate=1.25e9, tape_drives=4, tape_drive_rate=300e6)
    CapacityFactory(site=made["CERN"], network_rate=1.25e9, tape_drives=None, tape_drive_rate=None)
    return made


@pytest.fixture
def challenge() -> Challenge:
    return ChallengeFactory(slug="tc22", start=at(7), end=at(28))


def activity(challenge: Challenge, experiment: Experiment, start: datetime, end: datetime, **kwargs: object):
    return ActivityFactory(challenge=challenge, experiment=experiment, start=start, end=end, **kwargs)


@pytest.fixture
def three_experiments_at_cnaf(challenge: Challenge, experiments: dict[str, Experiment], sites: dict[str, Site]) -> None:
    """ATLAS 0.5 GB/s in 00-06, CMS 0.5 GB/s out 03-09, LHCb 0.4 GB/s in 05:00-05:30, all at CNAF on Mar 14."""
    cnaf = sites["CNAF"]
    TargetFactory(activity=activity(challenge, experiments["ATLAS"], at(14, 0), at(14, 6)), site=cnaf, rate=0.5e9)
    TargetFactory(
        activity=activity(challenge, experiments["CMS"], at(14, 3), at(14, 9)), site=cnaf, direction="out", rate=0.5e9
    )
    TargetFactory(activity=activity(challenge, experiments["LHCb"], at(14, 5), at(14, 5, 30)), site=cnaf, rate=0.4e9)


@pytest.mark.usefixtures("three_experiments_at_cnaf")
def test_overlapping_targets_of_three_experiments_add_up_per_hour(challenge: Challenge) -> None:
    load = selectors.site_load(challenge=challenge)
    hourly = {hour: load.at(site="CNAF", when=at(14, hour)) for hour in range(10)}
    assert [hourly[hour].network for hour in range(10)] == [
        0.5e9, 0.5e9, 0.5e9, 1.0e9, 1.0e9, 1.4e9, 0.5e9, 0.5e9, 0.5e9, 0.0,
    ]  # fmt: skip
    assert (hourly[5].network_in, hourly[5].network_out) == (0.9e9, 0.5e9)
    assert hourly[5].network_by_experiment == (("ATLAS", 0.5e9), ("CMS", 0.5e9), ("LHCb", 0.4e9))


@pytest.mark.usefixtures("three_experiments_at_cnaf")
def test_only_the_hour_above_capacity_is_oversubscribed_and_names_its_experiments(challenge: Challenge) -> None:
    load = selectors.site_load(challenge=challenge)
    assert load.oversubscribed_hours(site="CNAF") == [at(14, 5)]
    assert load.at(site="CNAF", when=at(14, 5)).oversubscribed_experiments == ("ATLAS", "CMS", "LHCb")
    assert load.at(site="CNAF", when=at(14, 4)).oversubscribed_experiments == ()


@pytest.mark.usefixtures("three_experiments_at_cnaf")
def test_runs_of_identical_hours_collapse_into_spans(challenge: Challenge) -> None:
    load = selectors.site_load(challenge=challenge)
    assert [(span.start, span.end, span.hours) for span in load.spans] == [
        (at(7), at(14, 0), 168),
        (at(14, 0), at(14, 3), 3),
        (at(14, 3), at(14, 5), 2),
        (at(14, 5), at(14, 6), 1),
        (at(14, 6), at(14, 9), 3),
        (at(14, 9), at(28), 14 * 24 - 9),
    ]
    assert sum(1 for _ in load.hourly()) == 21 * 24


@pytest.mark.usefixtures("three_experiments_at_cnaf")
def test_experiments_at_once_counts_each_experiment_running_in_the_hour(challenge: Challenge) -> None:
    concurrency = selectors.experiments_concurrency(challenge=challenge)
    assert [concurrency.at(at(14, hour)).count for hour in range(10)] == [1, 1, 1, 2, 2, 3, 1, 1, 1, 0]
    assert concurrency.at(at(14, 5)).experiments == ("ATLAS", "CMS", "LHCb")
    assert concurrency.peak == 3


def test_a_link_target_loads_both_ends(
    challenge: Challenge, experiments: dict[str, Experiment], sites: dict[str, Site]
) -> None:
    TargetFactory(
        activity=activity(challenge, experiments["ATLAS"], at(14), at(15)),
        site=None,
        direction="",
        link_from=sites["CERN"],
        link_to=sites["BNL"],
        rate=2e9,
    )
    load = selectors.site_load(challenge=challenge)
    cern, bnl = load.at(site="CERN", when=at(14, 12)), load.at(site="BNL", when=at(14, 12))
    assert (cern.network_out, cern.network_in, bnl.network_in, bnl.network_out) == (2e9, 0, 2e9, 0)
    assert cern.oversubscribed_experiments == ("ATLAS",)  # 2 GB/s over CERN's 1.25 GB/s
    assert not bnl.oversubscribed  # BNL's capacity is unknown: never oversubscribed
    assert "CNAF" not in [column.name for column in load.sites]  # no target touches it


def test_tape_kinds_are_compared_with_drives_times_drive_rate(
    challenge: Challenge, experiments: dict[str, Experiment], sites: dict[str, Site]
) -> None:
    cnaf = sites["CNAF"]
    atlas = activity(challenge, experiments["ATLAS"], at(14), at(16), kind=ActivityKind.TAPE_WRITE)
    cms = activity(challenge, experiments["CMS"], at(15), at(17), kind=ActivityKind.STAGING)
    TargetFactory(activity=atlas, site=cnaf, rate=1.0e9)
    TargetFactory(activity=cms, site=cnaf, direction="out", rate=0.5e9)
    load = selectors.site_load(challenge=challenge)
    alone, together = load.at(site="CNAF", when=at(14, 12)), load.at(site="CNAF", when=at(15, 12))
    assert (alone.tape, alone.tape_capacity, alone.network, alone.oversubscribed) == (1.0e9, 1.2e9, 0, False)
    assert (together.tape_in, together.tape_out) == (1.0e9, 0.5e9)
    assert together.tape_oversubscribed and not together.network_oversubscribed
    assert together.oversubscribed_experiments == ("ATLAS", "CMS")
    assert load.oversubscribed_hours(site="CNAF") == [at(15, hour) for hour in range(24)]


def test_a_network_target_is_not_compared_with_the_tape_drives(
    challenge: Challenge, experiments: dict[str, Experiment], sites: dict[str, Site]
) -> None:
    TargetFactory(activity=activity(challenge, experiments["ATLAS"], at(14), at(15)), site=sites["CNAF"], rate=1.22e9)
    cell = selectors.site_load(challenge=challenge).at(site="CNAF", when=at(14, 1))
    assert (cell.network, cell.tape, cell.oversubscribed) == (1.22e9, 0, False)  # above 1.2 GB/s of tape, below 1.25


def test_the_load_planner_costs_one_query_whatever_the_plan(
    challenge: Challenge, experiments: dict[str, Experiment], sites: dict[str, Site], django_assert_num_queries
) -> None:
    for day in range(8, 20):
        TargetFactory(activity=activity(challenge, experiments["CMS"], at(day), at(day + 2)), site=sites["CERN"])
        TargetFactory(activity=activity(challenge, experiments["LHCb"], at(day), at(day + 1)), site=sites["BNL"])
    with django_assert_num_queries(1):
        selectors.site_load(challenge=challenge)
    with django_assert_num_queries(1):
        selectors.experiments_concurrency(challenge=challenge)
    with django_assert_num_queries(1):
        selectors.clock_grid(challenge=challenge)


def test_the_grid_shows_the_modes_each_experiment_runs_each_iso_week(experiments: dict[str, Experiment]) -> None:
    challenge = ChallengeFactory(slug="grid", start=at(9), end=at(26))  # a Wednesday to a Saturday
    activity(challenge, experiments["ATLAS"], at(14), at(19), mode="DT", kind=ActivityKind.TAPE_WRITE)
    activity(challenge, experiments["CMS"], at(9), at(12), mode="A-DT", kind=ActivityKind.STAGING)
    activity(challenge, experiments["CMS"], at(13, 12), at(15), mode="DT")  # crosses Sunday night
    grid = selectors.clock_grid(challenge=challenge)
    assert grid.weeks == (at(7), at(14), at(21))
    assert [row.experiment for row in grid.rows] == ["ATLAS", "CMS"]  # LHCb runs nothing: no row
    assert [cell.modes for cell in grid.rows[0].cells] == [(), ("DT",), ()]
    assert grid.cell(experiment="ATLAS", week=at(14)).labels == ("DT (tape-write)",)
    assert [cell.modes for cell in grid.rows[1].cells] == [("A-DT", "DT"), ("DT",), ()]
    assert grid.cell(experiment="CMS", week=at(7)).kinds == ("staging", "transfer")


def test_an_activity_ending_at_monday_midnight_stays_out_of_the_next_week(experiments: dict[str, Experiment]) -> None:
    challenge = ChallengeFactory(slug="edge", start=at(7), end=at(21))
    activity(challenge, experiments["ATLAS"], at(10), at(14), mode="DT")
    assert [cell.modes for cell in selectors.clock_grid(challenge=challenge).rows[0].cells] == [("DT",), ()]
