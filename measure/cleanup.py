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
    because a WebDAV server deletes a collection with all it holds. A root:// directory whose URL carries a token is
    not asked (gfal2 2.21 lists it without the token, and is refused): XRootD itself refuses to remove a directory
    that is not empty (5.5 answers ENODEV, "No such device": measured)."""
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
            xrootd = directory.lower().startswith(("root:", "xroot:", "roots:", "xroots:"))
            with_token = xrootd and getattr(ctx, "bearer_for", lambda url: None)(directory) is not None
            if not with_token and [name for name in ctx.listdir(directory) if name not in (".", "..")]:
                continue
            ctx.rmdir(directory)
        except gfal2.GError as exc:
            # Not empty (a copy could not be deleted, said above) or already gone: nothing more to say.
            not_empty = (errno.ENOTEMPTY, errno.EEXIST) + ((errno.ENODEV,) if xrootd else ())
            if exc.code != errno.ENOENT and exc.code not in not_empty:
                result.errors.append(f"{directory}: {getattr(exc, 'message', '') or exc}")
    return result
