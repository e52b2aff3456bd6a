"""iperf3 runs and their results in the shape of a perfSONAR pScheduler throughput result.

The pScheduler shape (perfsonar/pscheduler, pscheduler-test-throughput): `succeeded`, `error`, `intervals` (each
with a `summary` and per-stream entries) and `summary` (`summary` and `streams`); rates in bits per second.
"""

from __future__ import annotations

import ctypes
import json
import signal
import subprocess
import threading
import time
from typing import Any

INTERRUPTED = "interrupt - the client has terminated"  # what iperf3 3.12 says in its JSON after SIGINT


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
    interrupted = str(raw.get("error") or "").startswith("interrupt") and bool(raw.get("intervals"))
    if raw.get("error") and not interrupted:
        return {"schema": 1, "succeeded": False, "error": str(raw["error"])}
    try:
        intervals = [
            {"summary": _stream(interval["sum"]), "streams": [_stream(stream) for stream in interval["streams"]]}
            for interval in raw["intervals"]
        ]
        end = raw["end"]
        sent, received = end["sum_sent"], end["sum_received"]
        # Interrupted, the client never hears the receiver's totals (0 bytes): what it sent is what it measured.
        side = "sender" if interrupted and not received.get("bytes") else "receiver"
        received = sent if side == "sender" else received
        summary = _stream({**received, "retransmits": sent.get("retransmits", 0)})
        streams = [
            _stream({**stream[side], "retransmits": stream["sender"].get("retransmits", 0)})
            for stream in end["streams"]
        ]
    except (KeyError, TypeError) as exc:
        raise Iperf3Error(f"not an iperf3 JSON result: missing {exc}") from exc
    result = {
        "schema": 1,
        "succeeded": True,
        "intervals": intervals,
        "summary": {"summary": summary, "streams": streams},
        "parallel": raw.get("start", {}).get("test_start", {}).get("num_streams", len(streams)),
    }
    if interrupted:
        # Stopped early (SIGINT): iperf3 still reports the intervals it measured and their sums.
        result["interrupted"] = str(raw["error"])
    return result


PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child between fork and exec must not import or load


def _die_with_parent() -> None:
    """In the child, before exec: end iperf3 with SIGTERM when the worker that started it dies. A worker killed by
    SIGKILL once left its 60 s iperf3 client running, and the testbed's iperf3 server (one test at a time) answered
    "busy" to the next probe."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def run_iperf3(
    host: str,
    port: int,
    *,
    seconds: int = 3,
    streams: int = 1,
    reverse: bool = False,
    timeout: float | None = None,
    connect_timeout: float = 5.0,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Run an iperf3 client against host:port and return the pScheduler-shaped result.

    reverse: the server sends and the client receives. A server that cannot be reached gives a failed result
    (succeeded False, iperf3's error), not an exception. `cancel`, when set, stops the client with SIGINT, after
    which iperf3 still prints what it measured so far: that partial result is returned (marked "interrupted").
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
    limit = time.monotonic() + (timeout or seconds + 30)
    with subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_die_with_parent,  # noqa: PLW1509
    ) as client:
        while client.poll() is None:
            if cancel is not None and cancel.is_set():
                client.send_signal(signal.SIGINT)
                break
            if time.monotonic() > limit:
                client.kill()
                client.communicate()
                raise Iperf3Error(f"iperf3 to {host}:{port} did not finish in time")
            if cancel is not None:
                cancel.wait(0.2)
            else:
                time.sleep(0.2)
        try:
            stdout, stderr = client.communicate(timeout=10)
        except subprocess.TimeoutExpired as exc:
            client.kill()
            raise Iperf3Error(f"iperf3 to {host}:{port} did not stop after SIGINT") from exc
    try:
        raw = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise Iperf3Error(f"iperf3 printed no JSON (exit {client.returncode}): {stderr.strip()}") from exc
    return parse_iperf3(raw)
