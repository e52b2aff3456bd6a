"""The mass-storage command of the testbed's XRootD tape site (``oss.msscmd PROG``): the tape side of the namespace.

Standalone, stdlib only: XRootD runs it as user xrootd under /usr/bin/python3, through a wrapper::

    exec /usr/bin/python3 /work/main/testbed/tape_mss.py --tape-root DIR/tape "$@"

XrdOssMSS (5.5.3) calls ``PROG <cmd> <lfn> [arg]``; the tape copy of ``<lfn>`` is ``DIR/tape/<lfn>``. The first output
line is the return code (0, or a negative errno), followed by the command's output:

    statx <lfn>            0 / "f rw-r--r-- 1 <uid> <gid> <atime> <ctime> <mtime> <size> <blksize> <blocks>"
                           (type f, d or l), or -2 when there is no tape copy
    exists <lfn>           0, or -2
    dlist <lfn>            0 and one name per line, or -2 / -20 (not a directory)
    rm <lfn>               0 after removing the tape copy (an empty directory for a directory), or -2
    mv <old> <new>         0 after renaming the tape copy, or -2
    create <lfn> <mode>    0 (nothing to do: files reach the tape by other means)

The exit code is 0 whenever a reply was printed.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import stat
import sys
from pathlib import Path


class MssError(Exception):
    """A failure reported to XRootD as a negative errno."""

    def __init__(self, code: int) -> None:
        super().__init__(os.strerror(code))
        self.code = code


def tape_file(root: Path, lfn: str) -> Path:
    """The tape copy of lfn under root; refuses paths that would leave root."""
    path = posixpath.normpath(re.sub(r"/+", "/", "/" + lfn.split("?", 1)[0]))
    if path.startswith("/.."):
        raise MssError(errno.EINVAL)
    return root / path.lstrip("/")


def statx_line(path: Path) -> str:
    """The XrdOssMSS statx record of path."""
    st = path.lstat()
    kind = "d" if stat.S_ISDIR(st.st_mode) else "l" if stat.S_ISLNK(st.st_mode) else "f"
    mode = stat.filemode(st.st_mode)[1:]
    return (
        f"{kind} {mode} {st.st_nlink} {st.st_uid} {st.st_gid} {int(st.st_atime)} {int(st.st_ctime)} "
        f"{int(st.st_mtime)} {st.st_size} {st.st_blksize} {st.st_blocks}"
    )


def execute(root: Path, command: str, args: list[str]) -> list[str]:
    """Run one MSS command and return the lines to print after the return code 0. Raises MssError."""
    if not args:
        raise MssError(errno.EINVAL)
    target = tape_file(root, args[0])
    try:
        if command == "statx":
            return [statx_line(target)]
        if command == "exists":
            target.lstat()
            return []
        if command == "dlist":
            if not target.is_dir():
                raise MssError(errno.ENOTDIR if target.exists() else errno.ENOENT)
            return sorted(entry.name for entry in target.iterdir() if not entry.name.startswith("."))
        if command == "rm":
            if target.is_dir() and not target.is_symlink():
                target.rmdir()
            else:
                target.unlink()
            return []
        if command == "mv":
            if len(args) < 2:
                raise MssError(errno.EINVAL)
            destination = tape_file(root, args[1])
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.rename(target, destination)
            return []
        if command == "create":
            return []
    except OSError as exc:
        raise MssError(exc.errno or errno.EIO) from exc
    raise MssError(errno.ENOTSUP)


def run(argv: list[str]) -> int:
    root = Path(os.environ.get("TAPE_ROOT", "."))
    args = list(argv)
    if args[:1] == ["--tape-root"] and len(args) > 1:
        root, args = Path(args[1]), args[2:]
    elif args and args[0].startswith("--tape-root="):
        root, args = Path(args[0].split("=", 1)[1]), args[1:]
    if not args:
        sys.stdout.write(f"-{errno.EINVAL}\n")
        sys.stderr.write("usage: tape_mss.py --tape-root DIR <statx|exists|dlist|rm|mv|create> <path> [arg]\n")
        return 0
    try:
        lines = execute(root, args[0], args[1:])
    except MssError as exc:
        sys.stdout.write(f"-{exc.code}\n")
        return 0
    sys.stdout.write("".join(f"{line}\n" for line in ["0", *lines]))
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
