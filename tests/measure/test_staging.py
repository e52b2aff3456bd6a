"""The staging probe: bulk bring-online from the emulated tape, through the Tape REST API and root:// prepare."""

from __future__ import annotations

import math
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from common import processes
from measure.staging import stage_files
from testbed.grid import TAPE_SITE, Testbed

pytestmark = pytest.mark.testbed

MAX_REQUEST_FILES = 30  # the private tape's largest stage request


@dataclass
class PrivateTape:
    """A tape daemon of this test alone (its own drives, so other test runs cannot take them)."""

    root: Path
    url: str
    drives: int
    drive_rate: float
    mount_time: float
    stage_delay: float

    def put(self, path: str, data: bytes) -> str:
        target = self.root / "tape" / "data" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return f"{self.url}/data/{path}"


@pytest.fixture
def private_tape(testbed: Testbed, tmp_path: Path) -> Iterator[PrivateTape]:
    https, control = processes.free_port(29200), processes.free_port(29300)
    tape = PrivateTape(tmp_path / "tape", f"davs://127.0.0.1:{https}", 2, 8e6, 1.0, 0.5)
    argv = [
        sys.executable, "-m", "testbed.tape", "--root", str(tape.root), "--host", "127.0.0.1",
        "--https-port", str(https), "--control-port", str(control),
        "--cert", str(testbed.pki.host_cert), "--key", str(testbed.pki.host_key),
        "--drives", str(tape.drives), "--drive-rate", str(tape.drive_rate),
        "--mount-time", str(tape.mount_time), "--stage-delay", str(tape.stage_delay), "--sitename", TAPE_SITE,
        "--max-request-files", str(MAX_REQUEST_FILES),
    ]  # fmt: skip
    pidfile = tmp_path / "tape.pid"
    processes.start(argv, pidfile=pidfile, logfile=tmp_path / "tape.log", cwd=settings.BASE_DIR)
    try:
        assert processes.wait_for_port(https, pid=processes.read_pid(pidfile), timeout=15)
        yield tape
    finally:
        # TERM, then KILL after 3 s: with gfal2's keep-alive connection open the daemon sometimes takes 10 s.
        processes.stop(pidfile, timeout=3)


@pytest.fixture
def tape_gfal(gfal: Any, private_tape: PrivateTape) -> Any:
    """gfal2 with a bearer credential for the private tape too (as testbed.client does for the testbed's)."""
    gfal.cred_set(private_tape.url + "/", gfal.cred_new("BEARER", "testbed"))
    return gfal


def test_twenty_files_staged_with_two_drives_in_bulk_requests_fit_the_drive_model(
    private_tape: PrivateTape, tape_gfal: Any
) -> None:
    size = 4_000_000  # half a second of a drive each
    directory = f"staging/{uuid.uuid4().hex}"  # one directory: one cartridge
    urls = [private_tape.put(f"{directory}/file{index:02d}", os.urandom(size)) for index in range(20)]
    result = stage_files(tape_gfal, urls, bulk_size=8, timeout=60, poll_interval=0.25, release=False)

    assert len(result.requests) == 3 and [request["files"] for request in result.requests] == [8, 8, 4]
    assert len({request["token"] for request in result.requests}) == 3
    assert [outcome.source_url for outcome in result.files] == urls
    assert all(outcome.ok and outcome.mode == "stage" and outcome.bytes == size for outcome in result.files)
    read = size / private_tape.drive_rate
    for outcome in result.files:
        details = outcome.details
        assert details["timing"] == "server"  # the Tape REST API shows when each recall started
        assert details["queue_seconds"] >= private_tape.stage_delay - 0.05
        # a recall is one read, plus a mount for the first file of each drive
        assert read - 0.05 <= details["stage_seconds"] <= read + private_tape.mount_time + 0.5
        # The bytes span the recall itself (not the wait in the queue), out of the tape into no other endpoint.
        assert outcome.start == datetime.fromisoformat(details["stage_started"]) <= outcome.end
        assert outcome.seconds == pytest.approx(details["stage_seconds"])
        assert outcome.destination_url == ""
    # Files wait their turn: the last ones queue behind nine others on their drive.
    queues = sorted(outcome.details["queue_seconds"] for outcome in result.files)
    assert queues[-1] >= private_tape.stage_delay + private_tape.mount_time + 8 * read
    # Two drives of one cartridge: one mount each, then ten reads each, after the stage delay.
    model = private_tape.stage_delay + private_tape.mount_time + math.ceil(20 / private_tape.drives) * read
    one_drive = private_tape.stage_delay + private_tape.mount_time + 20 * read
    assert model - 0.1 <= result.seconds <= model + 2.5 < one_drive, (result.seconds, model)
    summary = result.to_dict()
    assert summary["staged"] == 20
    # Asked before the recall (Tape REST archiveinfo through gfal2's user.status), all 20 were on tape only.
    assert (summary["files_from_tape"], summary["files_already_online"]) == (20, 0)
    assert summary["tape_rate"] == pytest.approx(20 * size / summary["tape_seconds"])
    # Kept online (release=False), asked again they are online already: none of them is a tape recall. That
    # recall releases them (the default), so the next one comes from tape again.
    again = stage_files(tape_gfal, urls[:3], timeout=60, poll_interval=0.25).to_dict()
    assert (again["files_from_tape"], again["files_already_online"], again["tape_rate"]) == (0, 3, None)
    assert again["released"] == 3
    third = stage_files(tape_gfal, urls[:3], timeout=60, poll_interval=0.25).to_dict()
    assert (third["files_from_tape"], third["files_already_online"]) == (3, 0)


def test_staging_through_root_prepare_brings_files_online(testbed: Testbed, gfal: Any) -> None:
    directory = f"staging/{uuid.uuid4().hex}"
    paths = [f"{directory}/file{index}" for index in range(4)]
    for path in paths:
        testbed.tape_put(path, os.urandom(1_000_000))
    urls = [testbed.url("tape.root", path) for path in paths]
    result = stage_files(gfal, urls, bulk_size=2, timeout=60, poll_interval=0.5, release=False)
    assert len(result.requests) == 2
    assert all(outcome.ok for outcome in result.files), [outcome.error for outcome in result.files]
    # gfal2's xrootd plugin answers user.status "UNKNOWN" here: the files' place is not told, so no tape rate is
    # claimed for them.
    summary = result.to_dict()
    assert (summary["files_from_tape"], summary["files_locality_unknown"], summary["tape_rate"]) == (0, 4, None)
    for path, outcome in zip(paths, result.files, strict=True):
        assert testbed.tape_disk_path(path).exists()
        assert outcome.bytes == 1_000_000
        # root:// shows no recall start: all of request-to-online is stage time
        assert outcome.details["timing"] == "request" and outcome.details["queue_seconds"] is None
        assert outcome.details["stage_seconds"] == pytest.approx(outcome.seconds)


@pytest.mark.parametrize("endpoint", ["tape.root", "tape.rest"])
def test_staging_a_file_that_does_not_exist_fails_with_the_endpoints_reason(
    testbed: Testbed, gfal: Any, endpoint: str
) -> None:
    present = f"staging/{uuid.uuid4().hex}/file"
    testbed.tape_put(present, os.urandom(1000))
    urls = [testbed.url(endpoint, present), testbed.url(endpoint, f"staging/missing-{uuid.uuid4().hex}")]
    result = stage_files(gfal, urls, timeout=60, poll_interval=0.5)
    staged, missing = result.files
    assert staged.ok
    assert not missing.ok and "not on tape" in missing.error
    assert missing.details["stage_seconds"] is None


def test_files_still_offline_at_the_timeout_fail_with_staging_timeout(
    private_tape: PrivateTape, tape_gfal: Any
) -> None:
    directory = f"staging/{uuid.uuid4().hex}"
    # 24 MB at 8 MB/s: three seconds of reading, after the mount; the timeout comes first.
    urls = [private_tape.put(f"{directory}/big", os.urandom(24_000_000))]
    result = stage_files(tape_gfal, urls, timeout=1.5, poll_interval=0.25)
    [outcome] = result.files
    assert not outcome.ok
    assert outcome.error == "staging timeout: not online after 1.5 s"
    assert 1.5 <= outcome.seconds < 3


def test_nonsense_parameters_are_refused_before_any_request(gfal: Any) -> None:
    with pytest.raises(ValueError, match="bulk_size"):
        stage_files(gfal, ["mock://host/file"], bulk_size=0)
    with pytest.raises(ValueError, match="no files"):
        stage_files(gfal, [])
    with pytest.raises(ValueError, match="twice"):
        stage_files(gfal, ["mock://host/a", "mock://host/a"])


def test_one_bulk_request_beats_requests_of_one_when_files_share_tapes(
    private_tape: PrivateTape, tape_gfal: Any
) -> None:
    """The CNAF finding: with files on three tapes asked for in turn, a bulk request is read tape by tape (a mount
    per tape), requests of one file each first in, first out (a mount at almost every file)."""
    size = 800_000  # 0.1 s of a drive; a mount is 1 s
    run = uuid.uuid4().hex
    order = [f"staging/{run}/{tape}/f{index}" for index in range(3) for tape in ("A", "B", "C")]
    bulk_urls = [private_tape.put(path, os.urandom(size)) for path in order]
    single_urls = [private_tape.put(path.replace(run, run + "-single"), os.urandom(size)) for path in order]
    bulk = stage_files(tape_gfal, bulk_urls, bulk_size=len(bulk_urls), timeout=60, poll_interval=0.2)
    single = stage_files(tape_gfal, single_urls, bulk_size=1, timeout=60, poll_interval=0.2)
    assert bulk.staged == single.staged == 9
    # Two drives: the bulk pays one mount per tape (3 s of mounts), the singles a mount at most files.
    assert bulk.seconds + 1.0 < single.seconds, (bulk.seconds, single.seconds)


def test_a_stage_request_over_the_sites_limit_fails_with_the_limit(private_tape: PrivateTape, tape_gfal: Any) -> None:
    run = uuid.uuid4().hex
    urls = [private_tape.put(f"staging/{run}/f{index}", b"x") for index in range(MAX_REQUEST_FILES + 1)]
    result = stage_files(tape_gfal, urls, bulk_size=len(urls), timeout=20, poll_interval=0.2)
    assert result.staged == 0
    # gfal2 gives the status code only (413); the probe says what it means.
    assert all(
        f"refused a stage request of {MAX_REQUEST_FILES + 1} files as too large" in o.error for o in result.files
    ), result.files[0].error
    ok = stage_files(tape_gfal, urls[:MAX_REQUEST_FILES], bulk_size=MAX_REQUEST_FILES, timeout=30, poll_interval=0.2)
    assert ok.staged == MAX_REQUEST_FILES  # split below the limit, the same files come online
