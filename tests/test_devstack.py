"""`bin/portal test`: the whole suite in lanes that share nothing, or exactly the pytest the user asked for; and what
lets the main lane run on xdist workers (tests/parallel.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from portal import testlanes
from tests.parallel import group_of, redis_url_for_worker


def test_with_arguments_the_test_command_runs_just_pytest_with_them() -> None:
    lanes = testlanes.test_lanes(["tests/runs", "-k", "reaper", "-x"])
    assert [(lane.argv, lane.env, lane.log) for lane in lanes] == [(["tests/runs", "-k", "reaper", "-x"], {}, None)]


def test_the_whole_suite_runs_the_fault_suite_beside_the_rest_on_a_testbed_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TESTBED_BASE_PORT", "29000")
    monkeypatch.delenv("TESTBED_DIR", raising=False)
    main, faults = testlanes.test_lanes([])
    assert main.argv[:2] == ["-m", "not faults"] and "-n" in main.argv and main.env == {} and main.log is None
    assert faults.argv[:2] == ["-m", "faults"] and faults.argv[-1] == "tests/faults"
    assert faults.env == {"TESTBED_DIR": str(testlanes.VAR / "testbed-faults"), "TESTBED_BASE_PORT": "29500"}
    assert faults.log == testlanes.VAR / "log" / "test-faults.log"


def test_a_lane_that_fails_or_collects_nothing_is_a_failure(tmp_path: Path) -> None:
    outcomes = {}
    for name, code in (("passes", "pass"), ("fails", "raise SystemExit(1)"), ("empty", "raise SystemExit(5)")):
        lane = testlanes.Lane(name, [], log=tmp_path / f"{name}.log")
        lane.process = subprocess.Popen([sys.executable, "-c", code])
        lane.process.wait()
        assert lane.poll()
        outcomes[name] = lane.outcome()
    assert outcomes == {
        "passes": "passed",
        "fails": "FAILED (exit 1)",
        "empty": "no tests collected (exit 5: a failure for this project)",
    }


def test_each_xdist_worker_gets_a_redis_db_of_its_own() -> None:
    assert redis_url_for_worker("redis://127.0.0.1:6379/6", "gw0") == "redis://127.0.0.1:6379/6"
    assert redis_url_for_worker("redis://127.0.0.1:6379/6", "gw1") == "redis://127.0.0.1:6379/7"
    assert redis_url_for_worker("redis://127.0.0.1:56379", "gw1") == "redis://127.0.0.1:56379/1"
    with pytest.raises(pytest.UsageError):
        redis_url_for_worker("redis://127.0.0.1:6379/15", "gw1")


def item(fixtures: set[str], markers: frozenset[str] = frozenset()) -> pytest.Item:
    """What group_of reads of a collected test: its fixtures (with those they use) and its markers."""
    return cast(
        pytest.Item,
        SimpleNamespace(fixturenames=fixtures, get_closest_marker=lambda name: name if name in markers else None),
    )


def test_tests_that_share_the_testbed_or_a_servers_port_keep_to_one_worker() -> None:
    assert group_of(item({"registry", "testbed", "db"})) == "testbed"  # through the runs' registry fixture
    assert group_of(item({"db"}, frozenset({"testbed"}))) == "testbed"
    assert group_of(item({"own_broker", "db"})) == group_of(item({"own_redis"})) == "testbed"  # port 46379
    assert group_of(item({"rabbit", "transactional_db"})) == "others"
    assert group_of(item({"live_server", "browser", "transactional_db"})) == "others"
    assert group_of(item({"db", "client"})) == "others"
