"""Real gfal2 copies between the testbed's servers, in each third-party mode, checked with ADLER32."""

from __future__ import annotations

import os
import subprocess
import uuid
import zlib
from typing import Any

import gfal2
import pytest

from testbed.grid import Testbed

pytestmark = pytest.mark.testbed

SIZE = 8 * 1024 * 1024


def adler32(data: bytes) -> str:
    return f"{zlib.adler32(data) & 0xFFFFFFFF:08x}"


def copy(gfal: Any, source: str, destination: str, *, mode: str | None = None, checksum: bool = True) -> list[str]:
    """Copy with gfal2 and return the descriptions of the events it emitted (they name the copy type)."""
    params = gfal.transfer_parameters()
    params.overwrite = True
    params.create_parent = True
    params.timeout = 120
    if checksum:
        params.set_checksum(gfal2.checksum_mode.both, "ADLER32", "")
    events: list[str] = []
    params.event_callback = lambda event: events.append(str(event.description))
    if mode:
        gfal.set_opt_string("HTTP PLUGIN", "DEFAULT_COPY_MODE", mode)
    gfal.filecopy(params, source, destination)
    return events


@pytest.fixture
def payload() -> bytes:
    return os.urandom(SIZE)


@pytest.fixture
def source_url(testbed: Testbed, gfal: Any, payload: bytes, tmp_path: Any) -> str:
    """A fresh random file uploaded to the Tier-0 site; the same file serves root:// and davs://."""
    local = tmp_path / "payload"
    local.write_bytes(payload)
    name = f"transfers/{uuid.uuid4().hex}"
    copy(gfal, f"file://{local}", testbed.url("t0.root", name))
    return name


def test_root_to_root_is_a_native_third_party_copy_with_matching_adler32(
    testbed: Testbed, gfal: Any, payload: bytes, source_url: str
) -> None:
    source, destination = testbed.url("t0.root", source_url), testbed.url("t1a.root", source_url)
    events = copy(gfal, source, destination)
    assert any("3rd pull" in event for event in events), events
    assert gfal.checksum(source, "ADLER32") == gfal.checksum(destination, "ADLER32") == adler32(payload)


@pytest.mark.parametrize("mode", ["3rd pull", "3rd push"])
def test_davs_to_davs_http_third_party_copy_in_each_mode(
    testbed: Testbed, gfal: Any, payload: bytes, source_url: str, mode: str
) -> None:
    source, destination = testbed.url("t0.https", source_url), testbed.url("t1b.https", source_url)
    events = copy(gfal, source, destination, mode=mode)
    assert any(mode in event for event in events), events
    assert gfal.checksum(source, "ADLER32") == gfal.checksum(destination, "ADLER32") == adler32(payload)


def test_streamed_copy_to_the_plain_webdav_site(testbed: Testbed, gfal: Any, payload: bytes, source_url: str) -> None:
    destination = testbed.url("webdav.https", source_url)
    events = copy(gfal, testbed.url("t0.https", source_url), destination, mode="streamed", checksum=False)
    assert any("streamed" in event for event in events), events
    assert gfal.stat(destination).st_size == SIZE
    stored = testbed.site_dir("webdav") / "data" / "data" / source_url
    assert adler32(stored.read_bytes()) == adler32(payload)


def test_plain_webdav_site_offers_no_checksum(testbed: Testbed, gfal: Any, source_url: str) -> None:
    destination = testbed.url("webdav.https", source_url)
    copy(gfal, testbed.url("t0.https", source_url), destination, mode="streamed", checksum=False)
    with pytest.raises(gfal2.GError):
        gfal.checksum(destination, "ADLER32")


def test_gfal_copy_cli_with_the_readme_environment_does_third_party_copy(testbed: Testbed, source_url: str) -> None:
    """Debian's gfal-copy, set up as the README says (testbed env), copies davs -> davs in pull mode."""
    env = {**os.environ, **testbed.client_environment()}
    source, destination = testbed.url("t0.https", source_url), testbed.url("t1a.https", f"cli/{source_url}")
    result = subprocess.run(
        ["gfal-copy", "-p", "-f", "-K", "ADLER32", "--copy-mode", "pull", "-v", source, destination],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "3rd pull" in result.stdout + result.stderr
