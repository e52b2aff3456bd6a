"""iperf3 runs and their results in the shape of a perfSONAR pScheduler throughput result.

The pScheduler shape (perfsonar/pscheduler, pscheduler-test-throughput): `succeeded`, `error`, `intervals` (each
with a `summary` and per-stream entries) and `summary` (`summary` and `streams`); rates in bits per second.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any


class Iperf3Error(RuntimeError):
    """iperf3 failed or printed something that is not an iperf3 JSON result."""


def _stream(entry: dict[str, Any]) -> dict[str, Any]:
    """One iperf3 stream or sum entry as a pScheduler stream/summary entry."""
    result: dict[str, Any] = {
        "start": entry["start"],
        "end": entry["end"],
        "throughput-bits": entry["bits_per_second"],
        "throughput-bytes": entry["bytes"],
        "omitted": bool(entry.get("omitted", False)),
    }
    if "socket" in entry:
        result["stream-id"] = entry["socket"]
    for source, target in (("retransmits", "retransmits"), ("snd_cwnd", "tcp-window-size"), ("rtt", "rtt")):
        if source in entry:
            result[target] = entry[source]
    return result


def parse_iperf3(data: dict[str, Any] | str) -> dict[str, Any]:
    """Turn iperf3's `--json` output (client side) into a pScheduler throughput result."""
    raw: dict[str, Any] = json.loads(data) if isinstance(data, str) else data
    if raw.get("error"):
        return {"schema": 1, "succeeded": False, "error": str(raw["error"])}
    try:
        intervals = [
            {"summary": _stream(interval["sum"]), "streams": [_stream(stream) for stream in interval["streams"]]}
            for interval in raw["intervals"]
        ]
        end = raw["end"]
        sent, received = end["sum_sent"], end["sum_received"]
        summary = _stream({**received, "retransmits": sent.get("retransmits", 0)})
        streams = [
            _stream({**stream["receiver"], "retransmits": stream["sender"].get("retransmits", 0)})
            for stream in end["streams"]
        ]
    except (KeyError, TypeError) as exc:
        raise Iperf3Error(f"not an iperf3 JSON result: missing {exc}") from exc
    return {
        "schema": 1,
        "succeeded": True,
        "intervals": intervals,
        "summary": {"summary": summary, "streams": streams},
        "parallel": raw.get("start", {}).get("test_start", {}).get("num_streams", len(streams)),
    }


def run_iperf3(
    host: str,
    port: int,
    *,
    seconds: int = 3,
    streams: int = 1,
    reverse: bool = False,
    timeout: float | None = None,
    connect_timeout: float = 5.0,
) -> dict[str, Any]:
    """Run an iperf3 client against host:port and return the pScheduler-shaped result.

    reverse: the server sends and the client receives. A server that cannot be reached gives a failed result
    (succeeded False, iperf3's error), not an exception.
    """
    argv = [
        "iperf3",
        "--client",
        host,
        "--port",
        str(port),
        "--time",
        str(seconds),
        "--parallel",
        str(streams),
        "--connect-timeout",
        str(int(connect_timeout * 1000)),
        "--json",
    ]
    if reverse:
        argv.append("--reverse")
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout or seconds + 30)
    except subprocess.TimeoutExpired as exc:
        raise Iperf3Error(f"iperf3 to {host}:{port} did not finish in time") from exc
    try:
        raw = json.loads(completed.stdout)
    except json.JSONDecodeError as exc:
        raise Iperf3Error(f"iperf3 printed no JSON (exit {completed.returncode}): {completed.stderr.strip()}") from exc
    return parse_iperf3(raw)
