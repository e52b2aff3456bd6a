"""How far a transfer run has got and when it should end, from what its files tell: the files done (their bytes
over their real [start, end)) and the copies in flight (what their workers last reported, if anything: an XRootD
third-party copy reports nothing until it ends, so its bytes are estimated from the pace of the copies before it).

The ETA plays the rest of the run as the engine will: each queued file goes to the slot that frees first and takes
an average copy's time. The run ends with the latest of the copies that end the slots, each one more draw of the
spread of the copies seen: the ETA is the expected latest of those draws, not the average copy's end (a run of 20
copies of 10 s +- 10 % ends about 1 s after the average says). Plain Python over snapshots of the rows, so that it
can be checked against runs whose true end is known (tests/runs/test_run_eta.py).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .choices import FileState

# A copy in flight has not ended: its estimate stops short of its size, so that it still has something left to do.
IN_FLIGHT_CAP = 0.99
# A copy past the time the slowest copy needed still gets this share of a copy's time: it is late, not done.
LATE_SHARE = 0.1
# The queue is played file by file for its last rounds only; the rounds before them take an average copy's time each.
PLAYED_ROUNDS = 2
# The spread of the copies is kept as this many of their rates (evenly chosen by rank), and the expected latest end
# integrated over this many steps: a bounded cost at every poll, whatever the run's size.
SPREAD_SAMPLES = 50
STEPS = 64


@dataclass(frozen=True)
class FileSnapshot:
    """What the estimate reads of one file: a done file's bytes over its [start, end), a copy in flight's size and
    what its worker last reported (progress_bytes at progress_at)."""

    state: str
    start: datetime | None
    end: datetime | None
    bytes: int
    size: int
    progress_bytes: int
    progress_at: datetime | None


@dataclass(frozen=True)
class TransferEstimate:
    """The observed rate (bytes/s over the window), the bytes the copies in flight have copied (as their workers
    reported, and as estimated) and the seconds left (None when unknown)."""

    rate: float | None
    bytes_reported: int
    bytes_estimated: int
    eta_seconds: float | None


@dataclass(frozen=True)
class Pace:
    """Bytes per second of an average copy, and the rates of the copies seen (their spread), slowest first."""

    average: float
    rates: tuple[float, ...]

    def durations(self, size: float) -> list[float]:
        """The seconds a copy of `size` bytes may take, one for each rate seen, shortest first."""
        return sorted(size / rate for rate in self.rates)


@dataclass(frozen=True)
class InFlight:
    """A copy in flight: bytes copied by now (estimated), and the seconds it still needs at the average pace and
    as the spread of the copies seen allows it, given how long it has gone already (its own pace when its worker
    reported)."""

    file: FileSnapshot
    copied: float
    average_left: float
    left: tuple[float, ...]


def _rate(start: datetime | None, end: datetime | None, size: int) -> float | None:
    seconds = (end - start).total_seconds() if start and end else 0.0
    return size / seconds if seconds > 0 and size else None


def _reported_rate(file: FileSnapshot) -> float | None:
    """A copy in flight's own rate, from what its worker last reported."""
    if file.state != FileState.RUNNING or not file.progress_bytes:
        return None
    return _rate(file.start, file.progress_at, file.progress_bytes)


def copy_pace(files: Sequence[FileSnapshot], *, now: datetime) -> Pace | None:
    """The pace of one copy, from the files done, else from the reports of the copies in flight; None before
    either. The first files to end are the fastest: a copy still going after the time the fastest one took counts
    as if it ended now (it will take longer still), or an early estimate would count the fast copies alone."""
    done = [(f.start, f.end, f.bytes) for f in files if f.state == FileState.DONE and _rate(f.start, f.end, f.bytes)]
    spans = done or [(f.start, f.progress_at, f.progress_bytes) for f in files if _reported_rate(f)]
    rates = [rate for start, end, size in spans if (rate := _rate(start, end, size))]
    if not rates:
        return None
    fastest = max(rates)
    for file in files:
        so_far = _rate(file.start, now, file.size) if file.state == FileState.RUNNING else None
        if so_far and so_far < fastest and not _reported_rate(file):
            spans.append((file.start, now, file.size))
            rates.append(so_far)
    seconds = sum((end - start).total_seconds() for start, end, _ in spans if start and end)
    rates.sort()
    if len(rates) > SPREAD_SAMPLES:
        rates = [rates[round(k * (len(rates) - 1) / (SPREAD_SAMPLES - 1))] for k in range(SPREAD_SAMPLES)]
    return Pace(average=sum(size for _, _, size in spans) / seconds, rates=tuple(rates))


def copy_in_flight(file: FileSnapshot, *, now: datetime, pace: Pace | None) -> InFlight:
    """How far a copy in flight got: its last report carried on at its own rate, or, with no report, the average
    pace over its time so far; never all its bytes. What it still needs: at its own rate when it reported, else
    what the durations seen longer than its time so far leave, and at least LATE_SHARE of a copy's time when it is
    already later than all of them."""
    own = _reported_rate(file)
    since = file.progress_at if own else file.start
    elapsed = max((now - since).total_seconds(), 0.0) if since else 0.0
    guess = file.progress_bytes + (own or (pace.average if pace else 0.0)) * elapsed
    if file.size:
        guess = min(guess, file.size * IN_FLIGHT_CAP)
    copied = max(guess, float(file.progress_bytes))
    if pace is None or not file.size:
        return InFlight(file, copied, 0.0, (0.0,))
    late = LATE_SHARE * file.size / pace.average
    average_left = max((file.size - copied) / (own or pace.average), late)
    if own:
        return InFlight(file, copied, average_left, (average_left,))
    left = [duration - elapsed for duration in pace.durations(file.size) if duration - elapsed > late]
    return InFlight(file, copied, average_left, tuple(left) or (late,))


def window_rate(
    files: Sequence[FileSnapshot], flights: Sequence[InFlight], *, now: datetime, window_start: datetime
) -> float:
    """Bytes moved in [window_start, now) over that time: each done file's bytes spread over its [start, end), each
    copy in flight's estimated bytes over [start, now)."""
    spans = [(f.start, f.end, float(f.bytes)) for f in files if f.state == FileState.DONE]
    spans += [(flight.file.start, now, flight.copied) for flight in flights]
    moved = 0.0
    for start, end, size in spans:
        if start is None or end is None:
            continue
        seconds = (end - start).total_seconds()
        share = max((end - max(start, window_start)).total_seconds(), 0.0) / seconds if seconds > 0 else 1.0
        moved += size * share
    return moved / (now - window_start).total_seconds()


def expected_latest(ends: Sequence[tuple[float, Sequence[float]]]) -> float:
    """The expected latest of `offset + duration` over `ends`, each duration drawn evenly from its list (sorted):
    low + the integral from low to high of P(latest > t), on STEPS midpoints."""
    low = max(offset + durations[0] for offset, durations in ends)
    high = max(offset + durations[-1] for offset, durations in ends)
    if high - low <= 1e-9:
        return high
    step = (high - low) / STEPS

    def all_ended_by(moment: float) -> float:
        return math.prod(bisect_right(durations, moment - offset) / len(durations) for offset, durations in ends)

    return low + sum(1 - all_ended_by(low + (k + 0.5) * step) for k in range(STEPS)) * step


def finish_seconds(flights: Sequence[InFlight], *, pace: Pace, queued: int, queued_size: float, slots: int) -> float:
    """Seconds until the last copy ends, with `queued` files of `queued_size` bytes still to start on `slots`
    copies at once (the run's concurrency)."""
    slots = max(slots, len(flights), 1)
    average, durations = queued_size / pace.average, pace.durations(queued_size)
    # Per slot: when it frees at the average pace, and its last copy (when it starts, the durations it may take).
    free = [flight.average_left for flight in flights] + [0.0] * (slots - len(flights))
    last: list[tuple[float, Sequence[float]]] = [(0.0, sorted(flight.left)) for flight in flights]
    last += [(0.0, [0.0])] * (slots - len(flights))
    rounds = max(queued - PLAYED_ROUNDS * slots, 0) // slots
    if rounds:
        free = [moment + rounds * average for moment in free]
        last = [(moment - average, durations) for moment in free]
    heap = [(moment, slot) for slot, moment in enumerate(free)]
    heapq.heapify(heap)
    for _ in range(queued - rounds * slots):
        moment, slot = heapq.heappop(heap)
        last[slot] = (moment, durations)
        heapq.heappush(heap, (moment + average, slot))
    return expected_latest(last)


def transfer_estimate(
    *,
    files: Sequence[FileSnapshot],
    now: datetime,
    window_start: datetime | None,
    queued: int,
    queued_bytes: int,
    slots: int,
) -> TransferEstimate:
    """Rate and ETA of a transfer run from its files done in the window and those in flight (`files`), its `queued`
    files not started (`queued_bytes` together) and its concurrency (`slots`)."""
    pace = copy_pace(files, now=now)
    flights = [copy_in_flight(f, now=now, pace=pace) for f in files if f.state == FileState.RUNNING]
    reported = sum(flight.file.progress_bytes for flight in flights)
    estimated = round(sum(flight.copied for flight in flights))
    if window_start is None or now <= window_start:
        return TransferEstimate(None, reported, estimated, None)
    rate = window_rate(files, flights, now=now, window_start=window_start)
    # Files of unknown size (an ad hoc run of given pairs learns them from the copies) have no time left to tell.
    unknown = (queued and not queued_bytes) or any(not flight.file.size for flight in flights)
    if pace is None or not (queued or flights) or unknown:
        return TransferEstimate(rate, reported, estimated, None)
    queued_size = queued_bytes / queued if queued else 0.0
    eta = finish_seconds(flights, pace=pace, queued=queued, queued_size=queued_size, slots=slots)
    return TransferEstimate(rate, reported, estimated, eta)
