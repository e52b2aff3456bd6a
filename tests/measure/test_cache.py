"""The cache probe (XCache study) against the testbed's XRootD proxy file cache in front of its slowed origin."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

from measure.cache import cache_study
from testbed.grid import Testbed

pytestmark = pytest.mark.testbed

# At least twice what the origin's throttle lets through per second, so that it holds them to its rate.
SIZES = (8 * 1024 * 1024, 16 * 1024 * 1024)


@pytest.fixture
def origin_files(testbed: Testbed) -> list[str]:
    """Random files of each size on the slowed origin, put on its disk (an upload would be throttled too)."""
    directory = f"cache/{uuid.uuid4().hex}"
    for size in SIZES:
        testbed.origin_put(f"{directory}/file-{size}", os.urandom(size))
    return [testbed.url("origin.root", f"{directory}/file-{size}") for size in SIZES]


def test_filled_cache_reads_faster_than_the_slowed_origin_for_every_size(
    testbed: Testbed, gfal: Any, origin_files: list[str]
) -> None:
    result = cache_study(gfal, origin_files, cache_url_of=testbed.cache_url_of, flush=testbed.cache_flush)
    assert [row.size for row in result.rows] == list(SIZES)
    assert all(outcome.ok for outcome in result.files), [outcome.error for outcome in result.files]
    for row in result.rows:
        assert row.direct_rate and row.empty_cache_rate and row.filled_cache_rate
        # The origin's throttle holds direct reads (and the cache's first read of a file) near its rate.
        assert row.direct_rate < 2 * testbed.config.origin_rate
        assert row.empty_cache_rate < 2 * testbed.config.origin_rate
        assert row.filled_cache_rate > 3 * row.direct_rate, row.to_dict()
    assert [outcome.details["path"] for outcome in result.files[:3]] == ["direct", "cache-empty", "cache-filled"]
    assert {outcome.checksum for outcome in result.files[:3]} == {result.files[0].checksum}
    assert result.to_dict()["rows"][0]["size"] == SIZES[0]


def test_the_flush_empties_the_cache_so_the_next_read_goes_to_the_origin(
    testbed: Testbed, gfal: Any, origin_files: list[str]
) -> None:
    first = cache_study(gfal, origin_files[:1], cache_url_of=testbed.cache_url_of, flush=testbed.cache_flush)
    assert first.rows[0].filled_cache_rate and first.rows[0].empty_cache_rate
    assert first.rows[0].filled_cache_rate > 3 * first.rows[0].empty_cache_rate
    cached = testbed.cache_dir / origin_files[0].removeprefix(testbed.url("origin.root") + "/")
    testbed.cache_flush()
    assert not any(testbed.cache_dir.iterdir()) and not cached.exists()
    second = cache_study(gfal, origin_files[:1], cache_url_of=testbed.cache_url_of, flush=testbed.cache_flush)
    assert second.rows[0].empty_cache_rate and second.rows[0].empty_cache_rate < 2 * testbed.config.origin_rate


def test_a_missing_origin_file_fails_every_read_with_gfal2s_message(testbed: Testbed, gfal: Any) -> None:
    missing = testbed.url("origin.root", f"cache/missing-{uuid.uuid4().hex}")
    result = cache_study(gfal, [missing], cache_url_of=testbed.cache_url_of, flush=testbed.cache_flush)
    [row] = result.rows
    assert (row.direct_rate, row.empty_cache_rate, row.filled_cache_rate) == (None, None, None)
    assert [outcome.ok for outcome in result.files] == [False, False, False]
    assert all("No such file" in outcome.error for outcome in result.files), [o.error for o in result.files]


def test_a_url_that_is_not_the_origins_is_refused_before_any_read(testbed: Testbed, gfal: Any) -> None:
    flushed = []
    with pytest.raises(ValueError, match="not a URL of the testbed's origin"):
        cache_study(
            gfal, [testbed.url("t0.root", "x")], cache_url_of=testbed.cache_url_of, flush=lambda: flushed.append(1)
        )
    assert flushed == []
