"""Test files of random bytes, made once per (endpoint, size) and reused. Plain Python with gfal2, no Django.

Random, never compressible: compressible fake data flattered tape results in real challenges. A file is uploaded
under a temporary name and renamed into place, so that two workers making the same file at once never leave a
short one behind; a file already there with the right size is reused as it is.
"""

from __future__ import annotations

import errno
import os
import tempfile
import uuid
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


def test_file(ctx: Any, base_url: str, size: int, *, timeout: int = 600, checksum: str = "none") -> str:
    """URL of a file of `size` random bytes on the endpoint base_url, uploaded only when absent or of another
    size. Raises gfal2.GError (with gfal2's message) when the endpoint refuses it. With a checksum algorithm
    (the one the copies will verify), the endpoint computes the file's checksum before this returns (see
    test_file_checksum)."""
    if size < 1:
        raise ValueError(f"a test file has at least 1 byte, not {size}")
    url = test_file_url(base_url, size)
    if _size(ctx, url) != size:
        _upload(ctx, url, size, timeout)
    if checksum.lower() != "none":
        test_file_checksum(ctx, url, checksum)
    return url


def _upload(ctx: Any, url: str, size: int, timeout: int) -> None:
    partial = f"{url}.part-{uuid.uuid4().hex[:12]}"
    with tempfile.TemporaryDirectory(prefix="testfile-") as directory:
        local = os.path.join(directory, "random")
        with open(local, "wb") as stream:
            left = size
            while left:
                chunk = os.urandom(min(CHUNK, left))
                stream.write(chunk)
                left -= len(chunk)
        params = ctx.transfer_parameters()
        params.overwrite = True
        params.create_parent = True
        params.timeout = timeout
        ctx.filecopy(params, f"file://{local}", partial)
    try:
        ctx.rename(partial, url)
    except gfal2.GError:
        # Another worker may have put it in place meanwhile; keep theirs when it is right.
        if _size(ctx, url) != size:
            raise
        ctx.unlink(partial)


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
