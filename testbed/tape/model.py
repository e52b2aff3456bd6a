"""What the emulated tape is made of: request and file states, stage requests, file tasks, drives."""

from __future__ import annotations

import os
import posixpath
import re
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

SUBMITTED = "SUBMITTED"
STARTED = "STARTED"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
CANCELED = "CANCELED"
FINAL_STATES = frozenset({COMPLETED, FAILED, CANCELED})
NOT_ON_TAPE = "file not on tape"
API_PREFIX = "/api/v1"
MAX_BODY = 16 * 1024 * 1024
READ_CHUNK = 1024 * 1024
EARLY_CANCEL_TTL = 600.0


def log(message: str) -> None:
    """One log line on stdout, with a timestamp."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    sys.stdout.write(f"{stamp}.{int(time.time() * 1000) % 1000:03d} {message}\n")
    sys.stdout.flush()


def normalize_path(path: str) -> str:
    """The canonical form of a logical file name: one leading slash, no "//", ".", ".." or trailing slash.

    A full URL is reduced to its path. Raises ValueError for anything that is not a non-empty string.
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"not a path: {path!r}")
    path = path.strip()
    if "://" in path:
        path = urlsplit(path).path
    path = re.sub(r"/+", "/", "/" + path)
    path = posixpath.normpath(path)
    return "/" if path in ("", ".") else re.sub(r"^/+", "/", path)


class TapeError(Exception):
    """A client error of the tape API, with the HTTP status to answer."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


# --- the tape library ------------------------------------------------------------------------------------


@dataclass
class FileTask:
    """One file of a stage request."""

    path: str
    request_id: str
    submitted: float
    eligible: float
    state: str = SUBMITTED
    started: float | None = None
    finished: float | None = None
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    tape_label: str = ""  # the cartridge the catalog put it on

    @property
    def tape(self) -> str:
        """The cartridge the file is on: the catalog's, else its parent directory."""
        return self.tape_label or posixpath.dirname(self.path)


@dataclass
class StageRequest:
    """A stage (recall) request: an id and its files, in the order they were asked for."""

    id: str
    created: float
    files: dict[str, FileTask] = field(default_factory=dict)

    def started(self) -> float | None:
        times = [task.started for task in self.files.values() if task.started is not None]
        return min(times) if times else None

    def completed(self) -> float | None:
        """When the last file reached a final state, if they all have."""
        if not self.files or any(task.state not in FINAL_STATES for task in self.files.values()):
            return None
        return max(task.finished or self.created for task in self.files.values())


@dataclass
class Drive:
    """A tape drive: the tape it holds and the file it is working on."""

    index: int
    tape: str | None = None
    task: FileTask | None = None
    mounts: int = 0
    files_read: int = 0
    bytes_read: int = 0
    last_request: str | None = None  # the request of the file it read last: its next file comes first


# --- files ---


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def chown(path: Path, uid: int, gid: int) -> None:
    """Give path to uid:gid when we can (as root); otherwise leave it."""
    try:
        st = path.lstat()
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.chown(path, uid, gid)
    except PermissionError:
        pass


def make_dirs(directory: Path, top: Path, uid: int, gid: int) -> None:
    """mkdir -p directory, giving the directories it creates below top to uid:gid."""
    missing = []
    current = directory
    while current != top and not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        chown(path, uid, gid)
