"""iperf3 against the testbed's server, its JSON parsed into the pScheduler throughput shape."""

from __future__ import annotations

import pytest

from measure.iperf3 import Iperf3Error, parse_iperf3, run_iperf3
from testbed.grid import Testbed

pytestmark = pytest.mark.testbed


def test_a_real_iperf3_run_parses_into_a_pscheduler_throughput_result(testbed: Testbed) -> None:
    endpoint = testbed.endpoint("iperf3")
    result = run_iperf3(testbed.config.host, endpoint.port, seconds=1, streams=2)
    assert result["succeeded"] is True
    summary = result["summary"]["summary"]
    assert summary["throughput-bits"] > 1e8  # loopback moves far more than 100 Mb/s
    assert summary["throughput-bytes"] * 8 / (summary["end"] - summary["start"]) == pytest.approx(
        summary["throughput-bits"], rel=0.05
    )
    assert len(result["summary"]["streams"]) == 2
    assert result["intervals"] and len(result["intervals"][0]["streams"]) == 2


def test_an_iperf3_error_is_a_failed_result_not_an_exception() -> None:
    result = parse_iperf3({"error": "unable to connect to server: Connection refused"})
    assert result == {"schema": 1, "succeeded": False, "error": "unable to connect to server: Connection refused"}


def test_iperf3_output_without_results_is_rejected() -> None:
    with pytest.raises(Iperf3Error, match="missing"):
        parse_iperf3({"start": {}})
