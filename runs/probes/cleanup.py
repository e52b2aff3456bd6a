"""Deleting what a transfer run wrote on its destinations. Plain Python with gfal2, no Django."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any

import gfal2


@dataclass
class CleanupResult:
    deleted: int = 0
    missing: int = 0  # never written (a failed try) or already gone
    errors: list[str] = field(default_factory=list)


def copies_delete(ctx: Any, urls: list[str], directories: list[str]) -> CleanupResult:
    """unlink every URL (a missing one is fine), then remove the run's directories when they are empty: a directory
    that still holds anything (someone else's file, a copy that could not be deleted) is left as it is, asked first
    because a WebDAV server deletes a collection with all it holds (XRootD refuses to remove a directory that is
    not empty: not asked there, as gfal2 2.21 lists a root:// directory without the URL's token)."""
    result = CleanupResult()
    for url in urls:
        try:
            ctx.unlink(url)
            result.deleted += 1
        except gfal2.GError as exc:
            if exc.code == errno.ENOENT:
                result.missing += 1
            else:
                result.errors.append(f"{url}: {getattr(exc, 'message', '') or exc}")
    for directory in directories:
        try:
            listed = not directory.lower().startswith(("root:", "xroot:", "roots:", "xroots:"))
            if listed and [name for name in ctx.listdir(directory) if name not in (".", "..")]:
                continue
            ctx.rmdir(directory)
        except gfal2.GError as exc:
            # Not empty (a copy could not be deleted, said above) or already gone: nothing more to say.
            if exc.code not in (errno.ENOENT, errno.ENOTEMPTY, errno.EEXIST):
                result.errors.append(f"{directory}: {getattr(exc, 'message', '') or exc}")
    return result
