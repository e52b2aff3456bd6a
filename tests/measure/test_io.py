"""The io probe (federation benchmark): a random file written to a testbed endpoint, read back, both timed."""

from __future__ import annotations

from typing import Any

import pytest

from common import processes
from measure.io import io_probe, read_file
from testbed.grid import Testbed

SIZE = 16 * 1024 * 1024


def assert_round_trip(result: Any, endpoint_url: str) -> None:
    assert result.ok, [outcome.error for outcome in result.files]
    written, read = result.files
    assert (written.mode, read.mode) == ("write", "read")
    assert written.destination_url.startswith(endpoint_url + "/io-probe/")
    assert read.source_url == written.destination_url
    assert written.bytes == read.bytes == SIZE
    assert read.checksum == written.checksum  # ADLER32 of what came back is that of what was sent
    assert written.start < written.end <= read.start < read.end
    assert result.write_rate == pytest.approx(SIZE / written.seconds)
    assert result.read_rate == pytest.approx(SIZE / read.seconds)
    assert result.to_dict()["files"][1]["mode"] == "read"


@pytest.mark.testbed
@pytest.mark.parametrize("endpoint", ["t1a.root", "t1a.https"])
def test_io_probe_writes_and_reads_back_a_random_file(testbed: Testbed, gfal: Any, endpoint: str) -> None:
    endpoint_url = testbed.url(endpoint)
    result = io_probe(gfal, endpoint_url, SIZE)
    assert_round_trip(result, endpoint_url)
    with pytest.raises(Exception, match=r"No such file|not found|exist"):  # the probe removes its file
        gfal.stat(result.files[0].destination_url)


@pytest.mark.testbed
def test_io_probe_to_a_port_nobody_listens_on_fails_the_write_with_gfal2s_message(gfal: Any) -> None:
    # davs://: the XRootD client behind root:// retries a refused connection for minutes before it gives up.
    port = processes.free_port(29100)
    result = io_probe(gfal, f"davs://127.0.0.1:{port}/data", 1024)
    [written] = result.files  # no read after a failed write
    assert not written.ok and not result.ok
    assert "Could not connect to server" in written.error, written.error
    assert result.write_rate is None and result.read_rate is None


@pytest.mark.testbed
def test_reading_a_missing_file_fails_with_no_such_file(testbed: Testbed, gfal: Any) -> None:
    outcome = read_file(gfal, testbed.url("t1a.root", "no/such/file"))
    assert not outcome.ok and outcome.bytes == 0
    assert "No such file" in outcome.error, outcome.error


def test_a_negative_size_is_refused_before_anything_is_written(gfal: Any) -> None:
    with pytest.raises(ValueError, match="size"):
        io_probe(gfal, "mock://host/data", -1)
