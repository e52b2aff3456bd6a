"""The transfer probe and its random test files, against the testbed's real servers: the mode gfal2 really used,
ADLER32 checked at both ends, and one clear error for each way a copy fails (provoked for real: a directory the
server may not write, a path that does not exist, a byte flipped on disk behind the server's stored checksum).
gfal2's mock plugin serves only the fast check of cancel."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import pytest

from measure.context import gfal2_context_new
from measure.stall import Abandoned, StallGuard
from measure.testfiles import test_file, test_file_checksum, test_file_url
from measure.transfer import CANCELLED, CHECKSUM, MISSING, REFUSED, STALLED, transfer_file
from testbed.grid import Testbed

MB = 1024 * 1024


def data_path(testbed: Testbed, site: str, name: str) -> Path:
    return testbed.site_dir(site) / "data" / "data" / name


@pytest.fixture
def name() -> str:
    return f"probe-tests/{uuid.uuid4().hex}"


@pytest.mark.testbed
def test_a_test_file_is_random_made_once_per_endpoint_and_size_and_reused(testbed: Testbed, gfal: Any) -> None:
    size = 3 * MB + 7  # a size no other test uses
    base = testbed.url("t0.root")
    stored = testbed.site_dir("t0") / "data" / "data" / "portal-testfiles" / f"random-{size}"
    stored.unlink(missing_ok=True)
    url = test_file(gfal, base, size)
    assert url == test_file_url(base, size) and stored.stat().st_size == size
    data = stored.read_bytes()
    assert len(zlib.compress(data)) > 0.99 * size  # random bytes do not compress
    mtime = stored.stat().st_mtime_ns
    assert test_file(gfal, base, size) == url
    assert stored.stat().st_mtime_ns == mtime  # reused, not made again
    stored.write_bytes(data[:100])  # a short file left behind is replaced
    test_file(gfal, base, size)
    assert stored.stat().st_size == size


@pytest.mark.testbed
def test_a_new_test_file_has_its_checksum_computed_before_any_copy_asks(testbed: Testbed, gfal: Any) -> None:
    """Parallel copies of a file whose checksum XRootD does not know yet hang (see test_file_checksum)."""
    size = 3 * MB + 11  # a size no other test uses
    stored = testbed.site_dir("t0") / "data" / "data" / "portal-testfiles" / f"random-{size}"
    stored.unlink(missing_ok=True)
    test_file(gfal, testbed.url("t0.root"), size)
    assert "user.XrdCks.adler32" not in os.listxattr(stored)  # without a checksum asked for, none is kept
    stored.unlink()
    test_file(gfal, testbed.url("t0.root"), size, checksum="ADLER32")
    assert "user.XrdCks.adler32" in os.listxattr(stored)
    assert test_file_checksum(gfal, test_file_url(testbed.url("t0.root"), size), "ADLER32") == (
        f"{zlib.adler32(stored.read_bytes()):08x}"
    )
    assert test_file(gfal, testbed.url("webdav.https"), size, checksum="ADLER32")  # nginx keeps none: no error


@pytest.mark.testbed
@pytest.mark.parametrize(
    "case",
    [
        ("t0.root", "t1a.root", "native", "native"),
        ("t0.https", "t1b.https", "pull", "pull"),
        ("t0.https", "t1b.https", "push", "push"),
        ("t0.https", "webdav.https", "streamed", "streamed"),
    ],
)
def test_the_outcome_says_what_gfal2_really_did(
    testbed: Testbed, gfal: Any, name: str, case: tuple[str, str, str, str]
) -> None:
    source, destination, mode, done = case
    source_url = test_file(gfal, testbed.url(source), 2 * MB)
    checksum = "none" if destination == "webdav.https" else "ADLER32"  # nginx offers no checksum
    outcome = transfer_file(gfal, source_url, testbed.url(destination, name), mode=mode, checksum=checksum, streams=2)
    assert outcome.ok, outcome.error
    assert outcome.mode == done and outcome.bytes == 2 * MB
    assert outcome.end > outcome.start and outcome.details["streams"] == 2
    assert any("TRANSFER:TYPE" in event for event in outcome.details["events"])
    if checksum == "ADLER32":
        assert outcome.checksum == gfal.checksum(source_url, "ADLER32")


@pytest.mark.testbed
@pytest.mark.parametrize(("destination", "mode"), [("t1a.root", None), ("t1a.https", "push")])
def test_a_destination_that_refuses_writes_is_named_so(
    testbed: Testbed, gfal: Any, destination: str, mode: str | None
) -> None:
    readonly = data_path(testbed, "t1a", "probe-tests/readonly")
    readonly.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:  # root's, every time: a testbed start gives the XRootD server's user its whole tree
        os.chown(readonly, 0, 0)
        readonly.chmod(0o755)
    (readonly / "f").unlink(missing_ok=True)  # left by a run before it was root's again
    source = "t0.https" if mode else "t0.root"
    outcome = transfer_file(
        gfal, test_file(gfal, testbed.url(source), MB), testbed.url(destination, "probe-tests/readonly/f"), mode=mode
    )
    assert not outcome.ok and outcome.bytes == 0
    assert outcome.error.startswith(REFUSED) and outcome.details["cause"] == REFUSED
    assert "permission denied" in outcome.error.lower() or "403" in outcome.error  # gfal2's own words kept


@pytest.mark.testbed
@pytest.mark.parametrize(("source", "destination"), [("t0.root", "t1a.root"), ("t0.https", "t1b.https")])
def test_a_missing_source_file_is_named_so(
    testbed: Testbed, gfal: Any, name: str, source: str, destination: str
) -> None:
    # XRootD answers a third-party copy of a missing file with "Destination does not support delegation".
    outcome = transfer_file(gfal, testbed.url(source, f"{name}-absent"), testbed.url(destination, name))
    assert not outcome.ok
    assert outcome.error.startswith(f"{MISSING} (") and outcome.details["cause"] == MISSING


@pytest.mark.testbed
@pytest.mark.parametrize("case", [("t0.root", "t1a.root", None), ("t0.https", "t1b.https", "pull")])
def test_a_file_corrupted_on_disk_fails_with_a_checksum_mismatch(
    testbed: Testbed, gfal: Any, name: str, case: tuple[str, str, str | None]
) -> None:
    """Silent corruption: the server computed and stored the file's ADLER32, then a byte rotted on disk (mtime
    kept), so the source's stored checksum no longer matches what arrives."""
    source, destination, mode = case
    path = data_path(testbed, "t0", name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(MB))
    for item in (path.parent, path):
        shutil.chown(item, "xrootd", "xrootd")
    url = testbed.url(source, name)
    stored_checksum = gfal.checksum(url, "ADLER32")
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[1000] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert gfal.checksum(url, "ADLER32") == stored_checksum  # the server still vouches for the old bytes
    outcome = transfer_file(gfal, url, testbed.url(destination, name), mode=mode)
    assert not outcome.ok
    assert outcome.error.startswith(CHECKSUM) and outcome.details["cause"] == CHECKSUM


@pytest.mark.testbed
@pytest.mark.parametrize(
    "case",
    [
        ("t0.https", "t1b.https", "push", "t1b"),  # pull, whose client waits on the frozen server: a run test
        ("t0.root", "t1a.root", "native", "t1a"),
    ],
)
def test_a_copy_to_a_server_that_stopped_answering_is_stopped_as_stalled(
    testbed: Testbed, gfal: Any, name: str, case: tuple[str, str, str, str]
) -> None:
    """The destination's server frozen (SIGSTOP: connections accepted, nothing answered), as a hung storage node:
    the stall guard stops the copy after 3 s of nothing, and reports it at most 10 s later whether gfal2's cancel
    brought the copy back or not (it does not break a TLS handshake, nor XRootD's wait for its socket), long before
    gfal2's own 60 s timeout."""
    source, destination, mode, server = case
    source_url = test_file(gfal, testbed.url(source), 2 * MB)
    with testbed.frozen(server):
        outcome = transfer_file(gfal, source_url, testbed.url(destination, name), mode=mode, timeout=3, stall_timeout=3)
    assert not outcome.ok and outcome.details["cause"] == STALLED, outcome.error
    assert outcome.error.startswith(f"{STALLED}: nothing moved for 3 s (0 bytes copied by then)"), outcome.error
    assert 3 <= outcome.seconds < 15


def test_a_wrong_expected_checksum_fails_the_copy_fast() -> None:
    ctx = gfal2_context_new()
    outcome = transfer_file(
        ctx, "mock://host/source?size=1000&checksum=0badf00d", "mock://host/destination", expected_checksum="00000001"
    )
    assert not outcome.ok and outcome.details["cause"] == CHECKSUM, outcome.error


def test_a_copy_cancelled_from_another_thread_ends_as_cancelled_within_a_second() -> None:
    ctx = gfal2_context_new()
    cancel = threading.Event()

    def press_cancel() -> None:
        cancel.set()
        ctx.cancel()

    timer = threading.Timer(0.5, press_cancel)
    timer.start()
    outcome = transfer_file(
        ctx, "mock://host/slow?size=1000000&time=20", "mock://host/out?time=20", checksum="none", cancel=cancel
    )
    timer.cancel()
    assert not outcome.ok and outcome.details["cause"] == CANCELLED, outcome.error
    assert outcome.seconds < 5


def test_a_copy_in_which_nothing_moves_is_stopped_as_stalled_after_its_stall_timeout() -> None:
    outcome = transfer_file(
        gfal2_context_new(),
        "mock://host/slow?size=1000000&time=20",
        "mock://host/out?time=20",
        checksum="none",
        timeout=1,
        stall_timeout=1,
    )
    assert not outcome.ok and outcome.details["cause"] == STALLED, outcome.error
    assert outcome.error.startswith(f"{STALLED}: nothing moved for 1 s (0 bytes copied by then)"), outcome.error
    assert 1 <= outcome.seconds < 5


def test_a_copy_cancelled_by_its_run_is_cancelled_even_when_it_also_stalled() -> None:
    ctx = gfal2_context_new()
    cancel = threading.Event()
    cancel.set()  # its run ended: whatever stopped the copy, it is cancelled, not a stall to try again
    outcome = transfer_file(
        ctx,
        "mock://host/slow?size=1000000&time=20",
        "mock://host/out?time=20",
        checksum="none",
        cancel=cancel,
        timeout=1,
        stall_timeout=1,
    )
    assert not outcome.ok and outcome.details["cause"] == CANCELLED, outcome.error


def test_the_stall_guard_waits_while_bytes_grow_then_stops_and_leaves_what_does_not_come_back() -> None:
    guard = StallGuard(gfal2_context_new(), 0.6, abandon_after=1.0)
    fired_while_growing: list[bool] = []

    def operation() -> None:  # gfal2's cancel cannot stop this one: it stands for a hung TLS handshake
        for done in range(1, 13):  # 1.2 s of growing bytes, twice the stall timeout
            guard.moved(done * 1000)
            time.sleep(0.1)
        fired_while_growing.append(guard.fired)
        for _ in range(40):  # then the same count for 4 s: no progress
            guard.moved(12_000)
            time.sleep(0.1)

    began = time.monotonic()
    with pytest.raises(Abandoned, match="had not returned 1 s after it was stopped"):
        guard.run(operation)
    assert fired_while_growing == [False]
    assert guard.fired and guard.bytes == 12_000 and 0.6 <= guard.quiet < 1.0
    assert 2.8 <= time.monotonic() - began < 3.8  # 1.2 s growing, 0.6 s quiet, 1 s for the cancel to work


def test_before_its_first_byte_a_copy_may_wait_its_first_byte_limit() -> None:
    guard = StallGuard(gfal2_context_new(), 0.3, first_byte_within=1.2, abandon_after=0.2)

    def queued_then_moving() -> None:  # a third-party copy in a server's queue for 0.8 s, then copying
        time.sleep(0.8)
        for done in range(1, 5):
            guard.moved(done)
            time.sleep(0.1)

    guard.run(queued_then_moving)
    assert not guard.fired
    with pytest.raises(Abandoned):
        guard.run(lambda: time.sleep(3))  # bytes moved already: 0.3 s of nothing is a stall
    assert guard.fired and 0.3 <= guard.quiet < 0.6


def test_an_operation_that_returns_gives_its_value_and_one_that_raises_its_error() -> None:
    guard = StallGuard(gfal2_context_new(), 5)
    assert guard.run(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        guard.run(lambda: 1 / 0)
    assert not guard.fired


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of"):
        transfer_file(gfal2_context_new(), "mock://a/b", "mock://a/c", mode="sideways")
