"""The testbed's slowed origin and the XCache in front of it: registered, throttled, cached, flushed."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from testbed.grid import CACHE_SITE, ORIGIN_SITE, PORT_OFFSETS, Testbed, TestbedConfig


def test_every_port_offset_is_distinct() -> None:
    assert len(set(PORT_OFFSETS.values())) == len(PORT_OFFSETS)


def test_the_sites_document_has_the_origin_and_the_cache(tmp_path: Path) -> None:
    document = Testbed(TestbedConfig(directory=tmp_path)).sites_document()
    sites = {site["name"]: site for site in document["sites"]}
    [origin] = sites[ORIGIN_SITE]["endpoints"]
    [cache] = sites[CACHE_SITE]["endpoints"]
    assert origin["url"] == "root://127.0.0.1:21011//data" and origin["kind"] == "disk"
    assert cache["url"] == "root://127.0.0.1:21012//data" and cache["kind"] == "cache"


def test_cache_url_of_maps_origin_urls_only(tmp_path: Path) -> None:
    bed = Testbed(TestbedConfig(directory=tmp_path))
    assert bed.cache_url_of("root://127.0.0.1:21011//data/a/b") == "root://127.0.0.1:21012//data/a/b"
    with pytest.raises(ValueError, match="not a URL of the testbed's origin"):
        bed.cache_url_of("root://127.0.0.1:21000//data/a/b")


def read_seconds(gfal: Any, url: str) -> float:
    start = time.monotonic()
    handle = gfal.open(url, "r")
    while handle.read_bytes(4 * 1024 * 1024):
        pass
    return time.monotonic() - start


@pytest.mark.testbed
def test_the_origin_is_throttled_and_the_cache_serves_a_second_read_from_disk(testbed: Testbed, gfal: Any) -> None:
    path = f"cache/{uuid.uuid4().hex}/file"
    size = int(3 * testbed.config.origin_rate)  # three seconds' worth of the throttle
    testbed.origin_put(path, os.urandom(size))
    testbed.cache_flush()
    assert read_seconds(gfal, testbed.url("origin.root", path)) >= 1.5
    cache_url = testbed.cache_url_of(testbed.url("origin.root", path))
    assert read_seconds(gfal, cache_url) >= 1.5  # the cache fetches from the slowed origin
    assert (testbed.cache_dir / "data" / path).stat().st_size == size
    assert read_seconds(gfal, cache_url) < 0.5  # then serves its copy
    testbed.cache_flush()
    assert list(testbed.cache_dir.iterdir()) == []
