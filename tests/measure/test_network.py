"""The network probe: iperf3 to the testbed's server as a pScheduler result, tracepath's path MTU and hops, and the
MTU comparison between the two ends."""

from __future__ import annotations

import pytest

from common import processes
from measure.network import mtu_warnings, network_probe, parse_tracepath
from testbed.grid import Testbed


def test_equal_mtus_give_no_warning() -> None:
    assert mtu_warnings(1500, 1500) == []
    assert mtu_warnings(9000, 9000) == []


def test_a_jumbo_frame_interface_on_a_1500_path_is_an_mtu_mismatch() -> None:
    [warning] = mtu_warnings(9000, 1500)
    assert "MTU mismatch" in warning and "9000" in warning and "1500" in warning


def test_a_1500_interface_on_a_jumbo_path_is_an_mtu_mismatch_too() -> None:
    [warning] = mtu_warnings(1500, 9000)
    assert "MTU mismatch" in warning


def test_loopbacks_65536_mtu_matches_the_largest_path_mtu_an_ip_packet_allows() -> None:
    assert mtu_warnings(65536, 65535) == []


def test_an_unknown_mtu_is_said_so_not_silently_passed() -> None:
    assert mtu_warnings(None, 1500) == ["MTU not checked: the local interface MTU is unknown"]
    assert mtu_warnings(1500, None) == ["MTU not checked: the path MTU is unknown"]


def test_tracepath_output_gives_path_mtu_and_hops() -> None:
    output = " 1?: [LOCALHOST]   pmtu 9000\n 1:  192.0.2.1   0.3ms\n 1:  192.0.2.1   0.2ms pmtu 1500\n"
    output += " 2:  198.51.100.7   1.1ms reached\n     Resume: pmtu 1500 hops 2 back 2 \n"
    trace = parse_tracepath(output)
    assert (trace.path_mtu, trace.hops, trace.reached) == (1500, 2, True)


def test_tracepath_that_runs_out_of_hops_has_an_mtu_but_no_hop_count() -> None:
    trace = parse_tracepath(" 1:  192.0.2.1   0.2ms\n     Too many hops: pmtu 1400\n     Resume: pmtu 1400 \n")
    assert (trace.path_mtu, trace.hops, trace.reached) == (1400, None, False)


@pytest.mark.testbed
def test_network_probe_to_the_testbed_measures_throughput_mtu_and_hops(testbed: Testbed) -> None:
    endpoint = testbed.endpoint("iperf3")
    result = network_probe(testbed.config.host, endpoint.port, streams=2, duration=2)
    assert result.ok, result.error
    summary = result.pscheduler["summary"]["summary"]
    assert summary["throughput-bits"] > 1e8  # loopback moves far more than 100 Mb/s
    assert len(result.pscheduler["summary"]["streams"]) == 2
    assert result.rate == pytest.approx(summary["throughput-bits"] / 8)
    assert (result.local_interface, result.local_mtu) == ("lo", 65536)
    assert result.path_mtu == 65535 and result.hops == 1
    assert result.warnings == []
    assert result.to_dict()["pscheduler"]["succeeded"] is True


@pytest.mark.testbed
def test_network_probe_in_reverse_has_the_server_send(testbed: Testbed) -> None:
    result = network_probe(testbed.config.host, testbed.endpoint("iperf3").port, duration=1, reverse=True)
    assert result.ok, result.error
    assert result.reverse and result.rate and result.rate > 1e7


def test_network_probe_to_a_port_nobody_listens_on_fails_with_connection_refused() -> None:
    port = processes.free_port(29000)
    result = network_probe("127.0.0.1", port, duration=1)
    assert not result.ok
    assert "Connection refused" in result.error
    assert result.rate is None
    assert result.path_mtu == 65535  # tracepath still describes the path to the host


def test_network_probe_refuses_nonsense_parameters() -> None:
    with pytest.raises(ValueError, match="streams"):
        network_probe("127.0.0.1", 5201, streams=0)


def test_large_packets_lost_where_1500_byte_ones_reach_is_an_mtu_mismatch() -> None:
    from measure.network import PathTrace, Tracepath, large_packet_warnings

    lost = PathTrace(Tracepath(9000, None, False), small_packets_reached=True)
    [warning] = large_packet_warnings("192.0.2.7", 9000, lost)
    assert warning.startswith("MTU mismatch: packets of 9000 bytes") and "1500 bytes do" in warning
    dead = PathTrace(Tracepath(9000, None, False), small_packets_reached=False)
    assert large_packet_warnings("192.0.2.7", 9000, dead) == []  # nothing reaches it: a dead host, not the MTU
