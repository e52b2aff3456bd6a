"""A copy that moved all its bytes and whose gfal2 call does not return (measure.arrival), with real copies on
the testbed: the copy really happens, end to end with ADLER32, and a seam in the probe (`copy_returned`) holds the
call's return in its thread, as XRootD 5.5.3 holds it when its checksum queue loses the destination's job (not
reproducible at will: docs/testbed.md). The destination is then a real file, left whole or changed on disk."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from measure import arrival
from measure.context import gfal2_context_new
from measure.stall import Arrived, StallGuard
from measure.testfiles import test_file
from measure.transfer import STALLED, transfer_file
from testbed.grid import Testbed

MB = 1024 * 1024
SIZE = 4 * MB


@pytest.fixture
def name() -> str:
    return f"probe-tests/{uuid.uuid4().hex}"


@pytest.fixture(params=["server", "read back"])
def checksum_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Who gives the destination's checksum: its server, or (the server given no time) its bytes read back."""
    if request.param == "read back":
        monkeypatch.setattr(arrival, "SERVER_CHECKSUM_WITHIN", 0.0)
    return str(request.param)


class HeldReturn:
    """The seam: once gfal2's copy call has returned, its thread waits here until released (at the latest 60 s)."""

    def __init__(self, before: Callable[[], None] | None = None) -> None:
        self.before, self.entered, self.released = before, threading.Event(), threading.Event()

    def __call__(self) -> None:
        if self.before is not None:
            self.before()
        self.entered.set()
        self.released.wait(60)


@pytest.fixture
def held() -> Iterator[Callable[..., HeldReturn]]:
    made: list[HeldReturn] = []

    def make(before: Callable[[], None] | None = None) -> HeldReturn:
        made.append(HeldReturn(before))
        return made[-1]

    yield make
    for hold in made:
        hold.released.set()
    deadline = time.monotonic() + 10  # the abandoned calls end once let go: no thread outlives the test
    while any(t.name == "gfal2-operation" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.1)


def destination_path(testbed: Testbed, name: str) -> Path:
    return testbed.site_dir("t1a") / "data" / "data" / name


def copy_held(testbed: Testbed, gfal: Any, name: str, hold: HeldReturn) -> Any:
    source_url = test_file(gfal, testbed.url("t0.root"), SIZE, checksum="ADLER32")
    return transfer_file(
        gfal, source_url, testbed.url("t1a.root", name), size=SIZE, arrived_grace=1, stall_timeout=120,
        copy_returned=hold,
    )  # fmt: skip


@pytest.mark.testbed
def test_a_copy_that_moved_all_its_bytes_and_does_not_return_is_done_when_its_destination_is_whole(
    testbed: Testbed, gfal: Any, name: str, checksum_by: str, held: Callable[..., HeldReturn]
) -> None:
    hold = held()
    began = time.monotonic()
    outcome = copy_held(testbed, gfal, name, hold)
    assert hold.entered.is_set() and not hold.released.is_set()  # ended while gfal2's call was still held
    assert outcome.ok, outcome.error
    assert time.monotonic() - began < 15
    assert outcome.bytes == SIZE and destination_path(testbed, name).stat().st_size == SIZE
    assert outcome.checksum == gfal.checksum(test_file(gfal, testbed.url("t0.root"), SIZE), "ADLER32")
    assert outcome.details["arrived"]["checksum_by"] == checksum_by
    assert outcome.details["call"].startswith("abandoned: it had not returned 1 s after all")


@pytest.mark.testbed
def test_a_copy_that_moved_all_its_bytes_and_does_not_return_is_tried_again_when_its_destination_differs(
    testbed: Testbed, gfal: Any, name: str, checksum_by: str, held: Callable[..., HeldReturn]
) -> None:
    """A byte of the destination changed after gfal2 compared the checksums (its mtime moved too, so the server
    sums it again): the destination is not the source's copy, and the try is a stall, which a run tries again."""

    def flip_a_byte() -> None:
        path = destination_path(testbed, name)
        data = bytearray(path.read_bytes())
        data[1000] ^= 0xFF
        path.write_bytes(bytes(data))
        moved = path.stat().st_mtime + 5
        os.utime(path, (moved, moved))

    outcome = copy_held(testbed, gfal, name, held(flip_a_byte))
    assert not outcome.ok and outcome.bytes == 0
    assert outcome.details["cause"] == STALLED, outcome.error
    assert outcome.error.startswith(f"{STALLED}: all {SIZE} bytes arrived but the copy had not returned 1 s later")
    assert f"({checksum_by})" in outcome.error  # "source ADLER32 x, destination y (how)"


def test_the_guard_ends_a_copy_on_the_look_a_grace_after_all_its_bytes_and_cancels_nothing() -> None:
    guard = StallGuard(gfal2_context_new(), 5, size=1000)

    def copy_that_never_returns() -> None:  # all bytes reported, then no return: the hung call
        guard.moved(500)
        guard.moved(1000)
        time.sleep(4)

    began = time.monotonic()
    with pytest.raises(Arrived) as arrived:
        guard.run(copy_that_never_returns, arrived_look=lambda: "the look's outcome", arrived_grace=1)
    assert arrived.value.verdict == "the look's outcome"
    assert 1 <= time.monotonic() - began < 2.5
    assert not guard.fired  # no cancel: gfal2 would delete a destination that is whole


def test_a_look_that_cannot_tell_leaves_the_copy_to_its_call_and_looks_again_later() -> None:
    guard = StallGuard(gfal2_context_new(), 5, size=1000)
    looks: list[float] = []

    def copy_that_returns_late() -> str:  # a busy server: the checksum comes, 3 s after the last byte
        guard.moved(1000)
        time.sleep(3)
        return "copied"

    def look() -> None:  # the destination did not answer in time: it cannot tell
        looks.append(time.monotonic())

    assert guard.run(copy_that_returns_late, arrived_look=look, arrived_grace=0.5, arrived_again=1) == "copied"
    assert 2 <= len(looks) <= 3 and looks[1] - looks[0] >= 1
