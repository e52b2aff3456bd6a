"""The cache probe (the XCache study): each file read directly from its origin, through an empty cache and through
the filled cache, with the throughput of each, by file size.

Plain Python with gfal2 (no Django). The caller says how a file is reached through the cache (`cache_url_of`) and
how the cache is emptied (`flush`, called once before the reads through the cache): both depend on the cache, the
probe only reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .io import read_file
from .outcomes import FileOutcome

PATHS = ("direct", "cache-empty", "cache-filled")


@dataclass
class CacheRow:
    """One file of the study: its size and the read rate (bytes/s) of each path, None where the read failed."""

    url: str
    size: int
    direct_rate: float | None
    empty_cache_rate: float | None
    filled_cache_rate: float | None

    @property
    def speedup(self) -> float | None:
        """How many times faster the filled cache reads than the origin."""
        if self.direct_rate and self.filled_cache_rate:
            return self.filled_cache_rate / self.direct_rate
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "size": self.size,
            "direct_rate": self.direct_rate,
            "empty_cache_rate": self.empty_cache_rate,
            "filled_cache_rate": self.filled_cache_rate,
            "speedup": self.speedup,
        }


@dataclass
class CacheResult:
    """Rows by file size (smallest first) and every read as a FileOutcome (details["path"] says which read)."""

    rows: list[CacheRow] = field(default_factory=list)
    files: list[FileOutcome] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [row.to_dict() for row in self.rows], "files": [outcome.to_dict() for outcome in self.files]}


def cache_study(
    ctx: Any, origin_urls: Sequence[str], *, cache_url_of: Callable[[str], str], flush: Callable[[], None]
) -> CacheResult:
    """Read every file of origin_urls three ways and tabulate the rates.

    Order: all direct reads; then `flush()`; then each file through the cache twice in a row (the first read
    fills the cache, the second is served from it). A read that fails keeps gfal2's message in its outcome and
    leaves that rate None; the size of a row is what the direct read (else any read) delivered.
    """
    cache_urls = {url: cache_url_of(url) for url in origin_urls}  # a URL the cache cannot serve fails before any read
    direct = {url: read_file(ctx, url, details={"path": "direct"}) for url in origin_urls}
    flush()
    empty: dict[str, FileOutcome] = {}
    filled: dict[str, FileOutcome] = {}
    for url in origin_urls:
        empty[url] = read_file(ctx, cache_urls[url], details={"path": "cache-empty", "origin_url": url})
        filled[url] = read_file(ctx, cache_urls[url], details={"path": "cache-filled", "origin_url": url})
    result = CacheResult()
    for url in origin_urls:
        outcomes = (direct[url], empty[url], filled[url])
        for outcome in outcomes[1:]:
            if outcome.ok and direct[url].ok and outcome.checksum != direct[url].checksum:
                outcome.ok = False
                outcome.error = (
                    "the cache served other bytes than the origin: "
                    f"ADLER32 {outcome.checksum}, origin {direct[url].checksum}"
                )
        size = next((outcome.bytes for outcome in outcomes if outcome.ok), direct[url].bytes)
        result.rows.append(CacheRow(url, size, direct[url].rate, empty[url].rate, filled[url].rate))
        result.files.extend(outcomes)
    result.rows.sort(key=lambda row: row.size)
    return result


__all__ = ["CacheResult", "CacheRow", "cache_study"]
