"""A run touches only what it wrote: no copy replaces a file that was already there (another portal's, or a run's
from before a database restore), and the clean-up leaves a directory that still holds anything. Against the
testbed's real XRootD and nginx WebDAV servers; and the rule that tells a copy stuck before its first byte from one
waiting in a server's queue (CopyPeers), with the stall guard that acts on it."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import gfal2
import pytest

from measure import stall
from measure.cleanup import copies_delete
from measure.context import gfal2_context_new
from measure.stall import Abandoned, CopyPeers, StallGuard
from measure.testfiles import test_file
from measure.transfer import EXISTS, transfer_file
from testbed.grid import Testbed

MB = 1024 * 1024


@pytest.mark.testbed
@pytest.mark.parametrize(
    ("source", "destination", "mode"), [("t0.root", "t1a.root", None), ("t0.https", "t1b.https", "pull")]
)
def test_a_copy_to_a_name_already_taken_fails_and_leaves_the_file_there(
    testbed: Testbed, gfal: Any, source: str, destination: str, mode: str | None
) -> None:
    name = f"probe-tests/{uuid.uuid4().hex}/taken"
    theirs = testbed.url(destination, name)
    transfer_file(gfal, test_file(gfal, testbed.url(source), 2 * MB + 1), theirs, mode=mode)
    before = gfal.checksum(theirs, "ADLER32")
    outcome = transfer_file(gfal, test_file(gfal, testbed.url(source), MB), theirs, mode=mode)
    assert not outcome.ok and outcome.details["cause"] == EXISTS, outcome.error
    assert outcome.error.startswith(f"{EXISTS}: ")
    assert gfal.stat(theirs).st_size == 2 * MB + 1 and gfal.checksum(theirs, "ADLER32") == before
    gfal.unlink(theirs)


@pytest.mark.testbed
@pytest.mark.parametrize("endpoint", ["t1a.root", "t1a.https", "webdav.https"])
def test_the_clean_up_leaves_a_directory_that_holds_someone_elses_file(
    testbed: Testbed, gfal: Any, endpoint: str
) -> None:
    directory = testbed.url(endpoint, f"probe-tests/{uuid.uuid4().hex}")
    source = test_file(gfal, testbed.url("t0.https" if "https" in endpoint else "t0.root"), MB)
    mode = "streamed" if endpoint.startswith("webdav") else None
    mine, theirs = f"{directory}/mine", f"{directory}/theirs"
    for url in (mine, theirs):
        assert transfer_file(gfal, source, url, mode=mode, checksum="none").ok
    result = copies_delete(gfal, [mine], [directory])
    assert result.deleted == 1 and not result.errors
    assert gfal.stat(theirs).st_size == MB  # the directory and their file stay
    result = copies_delete(gfal, [theirs], [directory])
    assert result.deleted == 1 and not result.errors
    with pytest.raises(gfal2.GError):
        gfal.stat(directory)  # empty now: removed


def test_a_copy_is_not_overtaken_while_a_copy_ahead_of_it_is_in_flight() -> None:
    peers = CopyPeers()
    link = ("a:1094", "b:1094")
    ahead = peers.begin(link)
    mine = peers.begin(link)
    later = peers.begin(link)
    other_link = peers.begin(("a:1094", "c:1094"))
    peers.end(later)
    peers.end(other_link)
    assert peers.overtaken(mine) is None  # `ahead` may hold the server's only slot
    peers.end(ahead)
    since = peers.overtaken(mine)
    assert since is not None and 0 <= since < 0.5


def test_a_copy_is_not_overtaken_until_a_later_copy_on_its_link_ended() -> None:
    peers = CopyPeers()
    link = ("a:1094", "b:1094")
    ahead, mine = peers.begin(link), peers.begin(link)
    peers.end(ahead)
    assert peers.overtaken(mine) is None  # nothing after it has passed it: it may be next in the queue
    elsewhere = peers.begin(("x:1094", "b:1094"))
    peers.end(elsewhere)
    assert peers.overtaken(mine) is None
    later = peers.begin(link)
    peers.end(later)
    assert peers.overtaken(mine) is not None
    peers.end(mine)
    assert peers.overtaken(mine) is None  # an ended copy is not stuck


def test_a_copy_without_its_first_byte_that_was_overtaken_is_stopped_as_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stall, "OVERTAKEN_GRACE", 0.5)
    peers = CopyPeers()
    link = ("a:1094", "b:1094")
    mine = peers.begin(link)
    later = peers.begin(link)
    # A long stall timeout and first-byte limit: only being left behind can stop this copy.
    guard = StallGuard(
        gfal2_context_new(), 60, first_byte_within=60, abandon_after=0.5, overtaken=lambda: peers.overtaken(mine)
    )
    threading.Timer(0.3, peers.end, args=(later,)).start()
    began = time.monotonic()
    with pytest.raises(Abandoned):
        guard.run(lambda: time.sleep(5))  # never moves a byte, and a cancel does not bring it back
    assert guard.fired and guard.stuck
    assert 0.8 <= time.monotonic() - began < 2.5  # 0.3 s to be overtaken, 0.5 s grace, 0.5 s to abandon
    assert guard.stall_message("x").startswith("stalled: no byte moved in ")


def test_a_copy_that_moved_bytes_is_never_taken_for_stuck(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stall, "OVERTAKEN_GRACE", 0.1)
    guard = StallGuard(gfal2_context_new(), 60, abandon_after=0.2, overtaken=lambda: 100.0)

    def moving() -> str:
        guard.moved(1)
        time.sleep(2.2)  # past two of the guard's looks
        return "done"

    assert guard.run(moving) == "done"
    assert not guard.fired
