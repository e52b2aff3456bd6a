"""Bring-online on the emulated tape: files go from offline to online, through root:// and the Tape REST API."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import gfal2
import pytest

from testbed.grid import Testbed

pytestmark = pytest.mark.testbed

SIZE = 1024 * 1024


def poll_until_online(gfal: Any, urls: list[str], token: str, timeout: float = 60) -> float:
    """Poll gfal2 until every file is online; returns the seconds it took. Fails on any real error."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        errors = gfal.bring_online_poll(urls, token)
        real = [error for error in errors if error is not None and error.code != 11]  # 11: EAGAIN, not yet
        assert not real, [(error.code, error.message) for error in real]
        if all(error is None for error in errors):
            return time.monotonic() - start
        time.sleep(0.2)
    pytest.fail(f"files not online after {timeout} s")


def read(gfal: Any, url: str) -> bytes:
    handle = gfal.open(url, "r")
    chunks = []
    while chunk := handle.read_bytes(SIZE):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.fixture
def tape_files(testbed: Testbed) -> dict[str, bytes]:
    """Two fresh files on the emulated tape only, by their path below /data."""
    directory = f"staging/{uuid.uuid4().hex}"
    files = {f"{directory}/file{index}": os.urandom(SIZE) for index in range(2)}
    for path, data in files.items():
        testbed.tape_put(path, data)
    return files


def test_bring_online_through_root_takes_tape_files_from_offline_to_online(
    testbed: Testbed, gfal: Any, tape_files: dict[str, bytes]
) -> None:
    urls = [testbed.url("tape.root", path) for path in tape_files]
    for path, url in zip(tape_files, urls, strict=True):
        assert not testbed.tape_disk_path(path).exists()
        with pytest.raises(gfal2.GError):  # offline: XRootD refuses to open it without a stage
            gfal.open(url, "r")
    _, token = gfal.bring_online(urls, 3600, 60, True)
    assert token
    poll_until_online(gfal, urls, token)
    for (path, data), url in zip(tape_files.items(), urls, strict=True):
        assert testbed.tape_disk_path(path).exists()
        assert read(gfal, url) == data


def test_bring_online_through_the_tape_rest_api_takes_tape_files_from_nearline_to_online(
    testbed: Testbed, gfal: Any, tape_files: dict[str, bytes]
) -> None:
    urls = [testbed.url("tape.rest", path) for path in tape_files]
    assert [gfal.getxattr(url, "user.status") for url in urls] == ["NEARLINE", "NEARLINE"]
    _, token = gfal.bring_online(urls, 3600, 60, True)
    assert token
    poll_until_online(gfal, urls, token)
    assert [gfal.getxattr(url, "user.status") for url in urls] == ["ONLINE_AND_NEARLINE"] * 2
    for (path, data), url in zip(tape_files.items(), urls, strict=True):
        assert read(gfal, testbed.url("tape.root", path)) == data  # the staged copy is the XRootD site's too
        assert read(gfal, url) == data


def test_release_evicts_the_disk_copy_through_the_tape_rest_api(
    testbed: Testbed, gfal: Any, tape_files: dict[str, bytes]
) -> None:
    urls = [testbed.url("tape.rest", path) for path in tape_files]
    _, token = gfal.bring_online(urls, 3600, 60, True)
    poll_until_online(gfal, urls, token)
    gfal.release(urls[0], token)
    assert gfal.getxattr(urls[0], "user.status") == "NEARLINE"
    assert gfal.getxattr(urls[1], "user.status") == "ONLINE_AND_NEARLINE"


def test_staging_a_file_that_is_not_on_tape_fails_with_a_reason(testbed: Testbed, gfal: Any) -> None:
    urls = [testbed.url("tape.root", f"staging/missing-{uuid.uuid4().hex}")]
    _, token = gfal.bring_online(urls, 3600, 60, True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        [error] = gfal.bring_online_poll(urls, token)
        if error is not None and error.code != 11:
            break
        time.sleep(0.2)
    assert error is not None and "not on tape" in error.message


def test_the_tape_queues_files_on_its_drives(testbed: Testbed, gfal: Any, tape_files: dict[str, bytes]) -> None:
    """The daemon's status shows the configured drives and counts the files it staged."""
    before = testbed.tape_rest_status()
    urls = [testbed.url("tape.rest", path) for path in tape_files]
    _, token = gfal.bring_online(urls, 3600, 60, True)
    poll_until_online(gfal, urls, token)
    after = testbed.tape_rest_status()
    assert len(after["drives"]) == testbed.config.tape_drives
    files_read = sum(drive["files_read"] for drive in after["drives"]) - sum(
        drive["files_read"] for drive in before["drives"]
    )
    assert files_read == 2
