"""The network probe: iperf3 throughput to a site's network host, and the path MTU and hop count from tracepath.

Plain Python (no Django). The throughput result is a perfSONAR pScheduler throughput result (see iperf3.py). An MTU
that differs between the two ends of a path (9000 at a site, 1500 on the way) once cut single-file rates from
50 MB/s to 2 MB/s: the probe compares the MTU of the local interface towards the host with the path MTU that
tracepath discovers, and warns when they differ. A smaller MTU that drops larger frames without a word (a switch
that does not take jumbo frames, or a far end at 1500 on the same layer-2 network) sends no ICMP back: tracepath then
keeps its own MTU and never reaches the host. So from an end whose MTU is above 1500, the probe first traces with
packets of 1500 bytes (what every path carries) and then at its own MTU: large packets lost where 1500-byte ones
get through is an MTU mismatch too, the one the JUNO challenge found from its 9000 side.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .iperf3 import Iperf3Error, run_iperf3

# An IPv4 packet holds at most 65535 bytes: loopback's 65536-byte MTU shows as a 65535 path MTU.
MAX_IP_PACKET = 65535
BUSY_RETRIES = 5
SMALL_PACKET = 1500  # bytes: the MTU every path carries


@dataclass
class Tracepath:
    """What tracepath found: the path MTU, the hops to the host (None when it was not reached) and its output."""

    path_mtu: int | None
    hops: int | None
    reached: bool
    output: str = ""


def parse_tracepath(output: str) -> Tracepath:
    """Parse tracepath's output; its last line reads "Resume: pmtu N hops H back B" (no hops when not reached)."""
    resume = re.search(r"Resume:\s*pmtu\s+(\d+)(?:\s+hops\s+(\d+))?", output)
    if resume is None:
        mtus = re.findall(r"pmtu\s+(\d+)", output)
        return Tracepath(int(mtus[-1]) if mtus else None, None, False, output)
    hops = resume.group(2)
    return Tracepath(int(resume.group(1)), int(hops) if hops else None, hops is not None, output)


def run_tracepath(host: str, *, max_hops: int = 30, timeout: float = 60, packet_length: int | None = None) -> Tracepath:
    """Run tracepath (iputils) numerically towards host; packet_length: its first packets' size (-l), else the
    local interface's MTU. A trace that has not ended after `timeout` s is what it found so far (not reached): a
    path that drops every packet answers no hop, and tracepath waits about 3 s for each of max_hops."""
    argv = ["tracepath", "-n", "-m", str(max_hops), *(["-l", str(packet_length)] if packet_length else []), host]
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else str(exc.stdout or "")
        trace = parse_tracepath(partial)
        return Tracepath(trace.path_mtu, None, False, f"{partial}(stopped after {timeout:g} s)\n")
    return parse_tracepath(completed.stdout + completed.stderr)


@dataclass
class PathTrace:
    """The path towards a host: tracepath at the local MTU, and whether packets of SMALL_PACKET bytes reached it
    (None when not tried: a local MTU of 1500 or less, or unknown)."""

    trace: Tracepath
    small_packets_reached: bool | None = None
    output: str = ""


def path_trace(host: str, local_mtu: int | None) -> PathTrace:
    """tracepath towards host; from an interface whose MTU is above SMALL_PACKET, with SMALL_PACKET bytes first.
    When those reach the host in H hops, the trace at the local MTU goes no further than H + 1 hops: a path that
    drops large packets costs seconds, not the minutes of 30 silent hops."""
    if local_mtu is None or local_mtu <= SMALL_PACKET:
        trace = run_tracepath(host)
        return PathTrace(trace, None, trace.output)
    small = run_tracepath(host, packet_length=SMALL_PACKET)
    if not small.reached or small.hops is None:
        trace = run_tracepath(host)
        return PathTrace(trace, False, small.output + trace.output)
    trace = run_tracepath(host, max_hops=small.hops + 1)
    return PathTrace(trace, True, small.output + trace.output)


def local_interface_mtu(host: str) -> tuple[str | None, int | None]:
    """The interface the kernel routes host through (ip route get) and its MTU; (None, None) when unknown."""
    try:
        route = subprocess.run(["ip", "route", "get", host], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    match = re.search(r"\bdev\s+(\S+)", route)
    if match is None:
        return None, None
    device = match.group(1)
    try:
        return device, int(Path(f"/sys/class/net/{device}/mtu").read_text().strip())
    except (OSError, ValueError):
        return device, None


def large_packet_warnings(host: str, local_mtu: int | None, path: PathTrace) -> list[str]:
    """The mismatch a path trace shows when packets of SMALL_PACKET bytes reach the host and those of the local MTU
    do not."""
    if path.small_packets_reached and not path.trace.reached:
        return [
            f"MTU mismatch: packets of {local_mtu} bytes (the local interface's MTU) do not reach {host}, packets of "
            f"{SMALL_PACKET} bytes do: a smaller MTU at the far end or on the way drops the larger ones"
        ]
    return []


def mtu_warnings(local_mtu: int | None, path_mtu: int | None) -> list[str]:
    """Warnings when the MTU of the local end differs from the path MTU (the smallest MTU on the way).

    An MTU above the largest IP packet (loopback's 65536) counts as 65535, the most a path MTU can be.
    """
    if local_mtu is None or path_mtu is None:
        missing = "local interface MTU" if local_mtu is None else "path MTU"
        return [f"MTU not checked: the {missing} is unknown"]
    if min(local_mtu, MAX_IP_PACKET) != min(path_mtu, MAX_IP_PACKET):
        return [
            f"MTU mismatch: the local interface has MTU {local_mtu} but the path MTU is {path_mtu}; "
            "packets are fragmented or dropped on the way, which can cut single-stream rates by an order of magnitude"
        ]
    return []


@dataclass
class NetworkResult:
    """iperf3's result as a pScheduler throughput result, with tracepath's path MTU and hops and the warnings."""

    host: str
    port: int
    streams: int
    duration: int
    reverse: bool
    pscheduler: dict[str, Any]
    path_mtu: int | None = None
    hops: int | None = None
    local_interface: str | None = None
    local_mtu: int | None = None
    warnings: list[str] = field(default_factory=list)
    reached: bool | None = None  # tracepath at the local MTU reached the host
    small_packets_reached: bool | None = None  # packets of SMALL_PACKET bytes did (None: not tried)
    tracepath: str = ""  # tracepath's output, as it printed it

    @property
    def ok(self) -> bool:
        return bool(self.pscheduler.get("succeeded"))

    @property
    def error(self) -> str:
        return str(self.pscheduler.get("error", ""))

    @property
    def rate(self) -> float | None:
        """Bytes per second received, None when iperf3 failed."""
        if not self.ok:
            return None
        return float(self.pscheduler["summary"]["summary"]["throughput-bits"]) / 8

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "streams": self.streams,
            "duration": self.duration,
            "reverse": self.reverse,
            "ok": self.ok,
            "rate": self.rate,
            "pscheduler": self.pscheduler,
            "path_mtu": self.path_mtu,
            "hops": self.hops,
            "local_interface": self.local_interface,
            "local_mtu": self.local_mtu,
            "warnings": self.warnings,
            "reached": self.reached,
            "small_packets_reached": self.small_packets_reached,
            "tracepath": self.tracepath,
        }


def network_probe(
    host: str,
    port: int,
    *,
    streams: int = 1,
    duration: int = 10,
    reverse: bool = False,
    cancel: threading.Event | None = None,
) -> NetworkResult:
    """iperf3 to host:port with `streams` parallel streams for `duration` seconds, then tracepath to host.

    An iperf3 server busy with another client is retried a few times. iperf3 failures (connection refused...) give
    a result with pscheduler["succeeded"] False and iperf3's error; tracepath runs either way. `cancel` stops
    iperf3 early, keeping the intervals it measured (see run_iperf3).
    """
    if streams < 1 or duration < 1 or not 0 < port < 65536:
        raise ValueError("need streams >= 1, duration >= 1 s and a port between 1 and 65535")
    for attempt in range(BUSY_RETRIES + 1):
        try:
            pscheduler = run_iperf3(host, port, seconds=duration, streams=streams, reverse=reverse, cancel=cancel)
        except Iperf3Error as exc:
            pscheduler = {"schema": 1, "succeeded": False, "error": str(exc)}
        if pscheduler["succeeded"] or "busy" not in str(pscheduler.get("error", "")) or attempt == BUSY_RETRIES:
            break
        time.sleep(1.0 + attempt)
    interface, local_mtu = local_interface_mtu(host)
    path = path_trace(host, local_mtu)
    trace = path.trace
    warnings = mtu_warnings(local_mtu, trace.path_mtu) + large_packet_warnings(host, local_mtu, path)
    if not trace.reached:
        warnings.append(f"tracepath did not reach {host}")
    return NetworkResult(
        host,
        port,
        streams,
        duration,
        reverse,
        pscheduler,
        trace.path_mtu,
        trace.hops,
        interface,
        local_mtu,
        warnings,
        trace.reached,
        path.small_packets_reached,
        path.output,
    )


__all__ = [
    "NetworkResult",
    "PathTrace",
    "Tracepath",
    "local_interface_mtu",
    "mtu_warnings",
    "network_probe",
    "parse_tracepath",
    "path_trace",
]
