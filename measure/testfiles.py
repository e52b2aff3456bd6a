"""Test files of random bytes, made once per (endpoint, size) and reused. Plain Python with gfal2, no Django.

Random, never compressible: compressible fake data flattered tape results in real challenges. The bytes of the
file of a size are always the same pseudo-random stream (seeded by the size), so that every maker of it makes the
same file and its checksum is known here without asking anyone: two workers that made `random-N` at once with
os.urandom once left a file whose checksum the server had computed from the other upload, and every later run of
that size failed on checksum. A file is uploaded under a temporary name and renamed into place (never a short one
in place); a file already there is used only when its size and, with a checksum algorithm, the server's checksum
are the expected ones, else it is made again. The caller serialises makers of one file (a lock per URL).
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import tempfile
import uuid
import zlib
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import gfal2

CHUNK = 4 * 1024 * 1024
DIRECTORY = "portal-testfiles"


def test_file_url(base_url: str, size: int) -> str:
    """Where the test file of this size lives on the endpoint whose URL is base_url."""
    return f"{base_url.rstrip('/')}/{DIRECTORY}/random-{size}"


def _size(ctx: Any, url: str) -> int | None:
    try:
        return int(ctx.stat(url).st_size)
    except gfal2.GError as exc:
        if exc.code == errno.ENOENT:
            return None
        raise


def test_file_bytes(size: int) -> Iterator[bytes]:
    """The bytes of the test file of this size, in chunks: the same pseudo-random stream every time."""
    stream = random.Random(f"portal-testfile-{size}")
    left = size
    while left:
        chunk = stream.randbytes(min(CHUNK, left))
        left -= len(chunk)
        yield chunk


@lru_cache(maxsize=64)
def test_file_expected_checksum(size: int, algorithm: str) -> str | None:
    """The checksum the test file of this size must have, as gfal2 prints it (ADLER32 and CRC32: 8 hex digits;
    MD5: 32), or None for an algorithm not known here. About 3 s a GiB (measured), once per size."""
    name = algorithm.upper()
    if name in ("ADLER32", "CRC32"):
        value = 1 if name == "ADLER32" else 0
        function = zlib.adler32 if name == "ADLER32" else zlib.crc32
        for chunk in test_file_bytes(size):
            value = function(chunk, value)
        return f"{value:08x}"
    if name == "MD5":
        digest = hashlib.md5(usedforsecurity=False)
        for chunk in test_file_bytes(size):
            digest.update(chunk)
        return digest.hexdigest()
    return None


def _same_checksum(found: str | None, expected: str) -> bool:
    if found is None:
        return True  # the endpoint keeps no checksums (plain WebDAV): the size is all it can tell
    found = found.strip().lower()
    try:
        return int(found, 16) == int(expected, 16)
    except ValueError:
        return found == expected


def test_file(ctx: Any, base_url: str, size: int, *, timeout: int = 600, checksum: str = "none") -> str:
    """URL of the test file of `size` bytes on the endpoint base_url, uploaded when absent, of another size, or
    (with a checksum algorithm, the one the copies will verify) of another checksum than its bytes have; the
    server's checksum is read back after an upload and must match. Raises gfal2.GError (with gfal2's message)
    when the endpoint refuses it, RuntimeError when the server keeps another checksum than the bytes sent."""
    if size < 1:
        raise ValueError(f"a test file has at least 1 byte, not {size}")
    url = test_file_url(base_url, size)
    expected = test_file_expected_checksum(size, checksum) if checksum.lower() != "none" else None
    if _size(ctx, url) == size and (
        expected is None or _same_checksum(test_file_checksum(ctx, url, checksum), expected)
    ):
        return url
    _upload(ctx, url, size, timeout)
    if expected is not None:
        found = test_file_checksum(ctx, url, checksum)
        if not _same_checksum(found, expected):
            raise RuntimeError(f"the test file {url} has {checksum} {found} at the server after upload, not {expected}")
    return url


def _upload(ctx: Any, url: str, size: int, timeout: int) -> None:
    partial = f"{url}.part-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="testfile-") as directory:
        local = os.path.join(directory, "random")
        with open(local, "wb") as stream:
            for chunk in test_file_bytes(size):
                stream.write(chunk)
        params = ctx.transfer_parameters()
        params.overwrite = True
        params.create_parent = True
        params.timeout = timeout
        ctx.filecopy(params, f"file://{local}", partial)
    try:
        ctx.rename(partial, url)
    except gfal2.GError:
        # A stale file of another content may stand in the way (some servers do not rename over a file).
        if _size(ctx, url) is not None:
            ctx.unlink(url)
        ctx.rename(partial, url)


def test_file_checksum(ctx: Any, url: str, algorithm: str) -> str | None:
    """Have the endpoint compute (and keep) the file's checksum once, before any copy of it: XRootD 5.5 answers
    concurrent checksum queries of a file whose checksum is not yet known in a way that leaves some of the
    third-party copies asking for it waiting forever (measured on the testbed: 5 parallel native copies of a new
    file with ADLER32, 1 to 3 of them hung in XrdCl::CopyProcess::Run, past their gfal2 timeout and deaf to
    ctx.cancel(); with the checksum computed first, none in 6 tries). None when the endpoint keeps no checksums
    (a plain WebDAV server): its copies must then run with checksum "none" anyway."""
    try:
        return str(ctx.checksum(url, algorithm))
    except gfal2.GError:
        return None


test_file.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, whatever its name
test_file_url.__test__ = False  # type: ignore[attr-defined]
test_file_checksum.__test__ = False  # type: ignore[attr-defined]
test_file_bytes.__test__ = False  # type: ignore[attr-defined]
test_file_expected_checksum.__test__ = False  # type: ignore[attr-defined]
