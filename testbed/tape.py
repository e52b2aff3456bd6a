"""The emulated tape of the testbed's tape site: a recall scheduler with tape drives, and the WLCG Tape REST API.

Plain Python (stdlib only, no Django), run as::

    python -m testbed.tape --root DIR --host 127.0.0.1 --https-port P --control-port C --cert CERT --key KEY \\
        --drives N --drive-rate BYTES_PER_S --mount-time S --stage-delay S --sitename NAME

Namespace: ``DIR/disk/<lfn>`` is the disk buffer (the online copies, XRootD's ``oss.localroot``) and ``DIR/tape/<lfn>``
holds the tape copies. The tape (cartridge) of a file is its parent directory.

The model: each file of a stage request becomes eligible ``stage-delay`` seconds after the request; ``drives`` drive
threads take eligible files first in, first out; a drive that has to switch to another tape pays ``mount-time``
seconds, a drive that holds the tape already does not; reading takes ``size / drive-rate`` seconds; the file is then
copied from tape to disk (atomically, owned by the owner of ``DIR/disk``). Files already on disk complete at once,
files that are not on tape fail with "file not on tape".

Servers:

- HTTPS on ``host:https-port``: the WLCG Tape REST API v1 as gfal2 2.21.3 uses it (``/.well-known/wlcg-tape-rest-api``,
  ``/api/v1/stage/``, ``/api/v1/stage/<id>``, ``/api/v1/stage/<id>/cancel``, ``DELETE /api/v1/stage/<id>``,
  ``/api/v1/release/<id>``, ``/api/v1/archiveinfo/``), GET/HEAD/PROPFIND of the files (reads only from disk),
  and ``GET /status``.
- Plain HTTP on ``127.0.0.1:control-port``: the same, plus the internal endpoints of the XRootD prepare program
  (testbed/tape_prep.py): ``POST /internal/stage`` ``{"requestId", "paths"}`` (the caller names the request),
  ``POST /internal/query`` ``{"requestId", "paths"}``, ``POST /internal/cancel`` ``{"requestId", "paths"}`` and
  ``POST /internal/evict`` ``{"paths"}``.
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import json
import os
import posixpath
import re
import shutil
import signal
import socket
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

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

    @property
    def tape(self) -> str:
        """The cartridge the file is on: its parent directory."""
        return posixpath.dirname(self.path)


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


class TapeLibrary:
    """The emulated tape: stage requests, a FIFO queue and the drives that serve it. Thread-safe."""

    def __init__(
        self, root: Path, drives: int = 1, drive_rate: float = 100e6, mount_time: float = 0.0, stage_delay: float = 0.0
    ) -> None:
        if drives < 1 or drive_rate <= 0 or mount_time < 0 or stage_delay < 0:
            raise ValueError("need drives >= 1, drive_rate > 0, mount_time >= 0 and stage_delay >= 0")
        self.root = Path(root)
        self.disk_root = self.root / "disk"
        self.tape_root = self.root / "tape"
        self.drive_rate = float(drive_rate)
        self.mount_time = float(mount_time)
        self.stage_delay = float(stage_delay)
        self.drives = [Drive(index) for index in range(drives)]
        self.requests: dict[str, StageRequest] = {}
        self.queue: list[FileTask] = []
        self._reading: set[str] = set()
        # Cancels that arrived before their stage (XRootD runs both asynchronously): reqid -> (when, paths or None).
        self._early_cancels: dict[str, tuple[float, set[str] | None]] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.disk_root.mkdir(parents=True, exist_ok=True)
        self.tape_root.mkdir(parents=True, exist_ok=True)

    # -- where files are --

    def disk_path(self, path: str) -> Path:
        return self.disk_root / normalize_path(path).lstrip("/")

    def tape_path(self, path: str) -> Path:
        return self.tape_root / normalize_path(path).lstrip("/")

    def on_disk(self, path: str) -> bool:
        return self.disk_path(path).is_file()

    def on_tape(self, path: str) -> bool:
        return self.tape_path(path).is_file()

    # -- lifecycle --

    def start(self) -> None:
        """Start the drive threads."""
        for drive in self.drives:
            thread = threading.Thread(target=self._drive_loop, args=(drive,), name=f"drive-{drive.index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the drives; a file being mounted or read is abandoned where it is."""
        self._stop.set()
        with self._cond:
            for drive in self.drives:
                if drive.task is not None:
                    drive.task.cancel.set()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    # -- requests --

    def submit(self, paths: Iterable[str], request_id: str | None = None) -> StageRequest:
        """Queue a stage request; with request_id of an existing request, add the paths it does not have yet."""
        normalized = _unique(normalize_path(path) for path in paths)
        if not normalized:
            raise TapeError(HTTPStatus.BAD_REQUEST, "no files to stage")
        now = time.time()
        with self._cond:
            rid = request_id or str(uuid.uuid4())
            request = self.requests.get(rid)
            if request is None:
                request = self.requests[rid] = StageRequest(rid, now)
            early = self._early_cancels.pop(rid, None)
            added = []
            for path in normalized:
                if path in request.files:
                    continue
                task = FileTask(path, rid, now, now + self.stage_delay)
                request.files[path] = task
                added.append(task)
                if early is not None and (early[1] is None or path in early[1]):
                    self._finish(task, CANCELED, now)
                elif self.on_disk(path):
                    self._finish(task, COMPLETED, now, started=now)
                elif not self.on_tape(path):
                    self._finish(task, FAILED, now, started=now, error=NOT_ON_TAPE)
                else:
                    self.queue.append(task)
            self._cond.notify_all()
        summary = ", ".join(f"{task.path} {task.state}" for task in added)
        log(f"stage request {rid}: {len(added)} file(s) [{summary}]")
        return request

    def get(self, request_id: str) -> StageRequest:
        with self._cond:
            request = self.requests.get(request_id)
        if request is None:
            raise TapeError(HTTPStatus.NOT_FOUND, f"no stage request with id {request_id}")
        return request

    def cancel(self, request_id: str, paths: Iterable[str] | None = None, strict: bool = True) -> list[str]:
        """Cancel files of a request (all of them when paths is None); files in a final state are left alone.

        Strict (the REST API): TapeError 404 for an unknown request, 400 for paths that are not in the request.
        Otherwise (XRootD, whose cancel may overtake its stage) paths not in the request are ignored, and the cancel
        of an unknown request is remembered for a while and applied when the stage arrives.
        Returns the paths canceled.
        """
        paths = None if paths is None else list(paths)
        if not strict:
            with self._cond:
                now = time.time()
                for rid, (when, _) in list(self._early_cancels.items()):
                    if now - when > EARLY_CANCEL_TTL:
                        del self._early_cancels[rid]
                if request_id not in self.requests:
                    early = None if paths is None else {normalize_path(path) for path in paths}
                    self._early_cancels[request_id] = (now, early)
                    log(f"cancel {request_id}: request not (yet) known, the cancel waits for it")
                    return []
        request = self.get(request_id)
        now = time.time()
        canceled = []
        with self._cond:
            if paths is None:
                targets = list(request.files.values())
            else:
                wanted = _unique(normalize_path(path) for path in paths)
                missing = [path for path in wanted if path not in request.files]
                if missing and strict:
                    raise TapeError(HTTPStatus.BAD_REQUEST, f"not in request {request_id}: {', '.join(missing)}")
                targets = [request.files[path] for path in wanted if path in request.files]
            for task in targets:
                if task.state in FINAL_STATES:
                    continue
                if task.state == SUBMITTED:
                    self.queue.remove(task)
                task.cancel.set()
                self._finish(task, CANCELED, now)
                canceled.append(task.path)
            self._cond.notify_all()
        log(f"cancel {request_id}: {len(canceled)} file(s) canceled {canceled}")
        return canceled

    def delete(self, request_id: str) -> None:
        """Cancel what is left of a request and forget it."""
        self.cancel(request_id)
        with self._cond:
            self.requests.pop(request_id, None)
        log(f"deleted request {request_id}")

    def evict(self, paths: Iterable[str]) -> dict[str, str]:
        """Remove the disk copies of files that are also on tape. Returns what happened per path."""
        result = {}
        for path in _unique(normalize_path(path) for path in paths):
            disk = self.disk_path(path)
            if not disk.is_file():
                result[path] = "not on disk"
            elif not self.on_tape(path):
                result[path] = "kept: not on tape"
            else:
                try:
                    disk.unlink()
                    result[path] = "evicted"
                except FileNotFoundError:
                    result[path] = "not on disk"
        log(f"evict: {result}")
        return result

    def locality(self, path: str) -> str | None:
        """TAPE, DISK, DISK_AND_TAPE, NONE (not a file, e.g. a directory), or None when nothing is there."""
        disk, tape = self.disk_path(path), self.tape_path(path)
        on_disk, on_tape = disk.is_file(), tape.is_file()
        if on_disk and on_tape:
            return "DISK_AND_TAPE"
        if on_tape:
            return "TAPE"
        if on_disk:
            return "DISK"
        if disk.exists() or tape.exists():
            return "NONE"
        return None

    # -- JSON views --

    def request_json(self, request_id: str) -> dict[str, Any]:
        """The Tape REST view of a stage request."""
        request = self.get(request_id)
        with self._cond:
            files = []
            for task in request.files.values():
                entry: dict[str, Any] = {"path": task.path, "state": task.state}
                if task.state == FAILED:
                    entry["error"] = task.error or "failed"
                elif task.state != CANCELED:
                    entry["onDisk"] = self.on_disk(task.path)
                entry.update(submittedAt=task.submitted, startedAt=task.started, finishedAt=task.finished)
                files.append(entry)
            started, completed = request.started(), request.completed()
        return {
            "id": request.id,
            "createdAt": int(request.created),
            "startedAt": None if started is None else int(started),
            "completedAt": None if completed is None else int(completed),
            "files": files,
        }

    def archiveinfo_json(self, paths: Iterable[str]) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = []
        for path in paths:
            normalized = normalize_path(path)
            locality = self.locality(normalized)
            if locality is None:
                result.append({"path": normalized, "error": "No such file"})
            else:
                result.append({"path": normalized, "locality": locality})
        return result

    def prepare_query_json(self, request_id: str, paths: Iterable[str]) -> dict[str, Any]:
        """What the XRootD prepare program prints for a query (see testbed/tape_prep.py), plus "known"."""
        with self._cond:
            request = self.requests.get(request_id)
            responses = []
            for raw in paths:
                path = normalize_path(raw)
                task = request.files.get(path) if request else None
                on_tape, online = self.on_tape(path), self.on_disk(path)
                requested = task is not None and task.state in (SUBMITTED, STARTED, COMPLETED)
                if task is not None:
                    req_time = str(int(task.submitted))
                elif request is not None:
                    req_time = str(int(request.created))
                else:
                    req_time = "0"
                responses.append(
                    {
                        "path": path,
                        "path_exists": on_tape or online,
                        "on_tape": on_tape,
                        "online": online,
                        "requested": requested,
                        "has_reqid": task is not None,
                        "req_time": req_time,
                        "error_text": (task.error or "") if task is not None and task.state == FAILED else "",
                        "state": task.state if task is not None else None,
                    }
                )
        return {"request_id": request_id, "known": request is not None, "responses": responses}

    def status_json(self) -> dict[str, Any]:
        with self._cond:
            counts = {state: 0 for state in (SUBMITTED, STARTED, COMPLETED, FAILED, CANCELED)}
            for request in self.requests.values():
                for task in request.files.values():
                    counts[task.state] += 1
            now = time.time()
            return {
                "drives": [
                    {
                        "index": drive.index,
                        "tape": drive.tape,
                        "file": drive.task.path if drive.task else None,
                        "mounts": drive.mounts,
                        "files_read": drive.files_read,
                        "bytes_read": drive.bytes_read,
                    }
                    for drive in self.drives
                ],
                "queue": len(self.queue),
                "eligible": sum(1 for task in self.queue if task.eligible <= now),
                "requests": len(self.requests),
                "files": counts,
                "config": {
                    "drives": len(self.drives),
                    "drive_rate": self.drive_rate,
                    "mount_time": self.mount_time,
                    "stage_delay": self.stage_delay,
                },
            }

    # -- the drives --

    def _finish(
        self, task: FileTask, state: str, now: float, started: float | None = None, error: str | None = None
    ) -> None:
        """Put a task in a final state (caller holds the lock)."""
        task.state = state
        if started is not None and task.started is None:
            task.started = started
        task.finished = now
        task.error = error

    def _next_task(self, now: float) -> tuple[FileTask | None, float | None]:
        """The first eligible file no drive is reading, or None and how long to wait (caller holds the lock)."""
        wait: float | None = None
        for task in self.queue:
            if task.eligible > now:
                wait = task.eligible - now if wait is None else min(wait, task.eligible - now)
                continue
            if task.path in self._reading:
                continue  # another drive is recalling the same file: take it once that is done
            return task, None
        return None, wait

    def _drive_loop(self, drive: Drive) -> None:
        while not self._stop.is_set():
            with self._cond:
                task, wait = self._next_task(time.time())
                if task is None:
                    self._cond.wait(wait)
                    continue
                self.queue.remove(task)
                task.state = STARTED
                task.started = time.time()
                drive.task = task
                self._reading.add(task.path)
            try:
                self._recall(drive, task)
            except Exception as exc:  # keep the drive alive, fail the file
                with self._cond:
                    if task.state not in FINAL_STATES:
                        self._finish(task, FAILED, time.time(), error=f"recall failed: {exc}")
                log(f"drive {drive.index}: {task.path} FAILED: {exc!r}")
            finally:
                with self._cond:
                    drive.task = None
                    self._reading.discard(task.path)
                    self._cond.notify_all()

    def _recall(self, drive: Drive, task: FileTask) -> None:
        """Mount, read and copy one file (called without the lock)."""
        waited = task.started - task.submitted if task.started else 0.0
        if self.on_disk(task.path):
            with self._cond:
                if task.state == STARTED:
                    self._finish(task, COMPLETED, time.time())
            log(f"drive {drive.index}: {task.path} already on disk, COMPLETED (req {task.request_id})")
            return
        source = self.tape_path(task.path)
        if not source.is_file():
            with self._cond:
                if task.state == STARTED:
                    self._finish(task, FAILED, time.time(), error=NOT_ON_TAPE)
            log(f"drive {drive.index}: {task.path} FAILED: {NOT_ON_TAPE}")
            return
        mount = 0.0
        if drive.tape != task.tape:
            drive.tape = None
            if self.mount_time and task.cancel.wait(self.mount_time):
                self._log_canceled(drive, task, "mounting")
                return
            drive.tape = task.tape
            drive.mounts += 1
            mount = self.mount_time
        size = source.stat().st_size
        read = size / self.drive_rate
        if read and task.cancel.wait(read):
            self._log_canceled(drive, task, "reading")
            return
        self._copy_to_disk(task, source)
        drive.files_read += 1
        drive.bytes_read += size
        elapsed = (task.finished or time.time()) - task.submitted
        log(
            f"drive {drive.index}: {task.path} {task.state} tape={task.tape} size={size} waited={waited:.2f}s "
            f"mount={mount:.2f}s read={read:.2f}s total={elapsed:.2f}s (req {task.request_id})"
        )

    def _log_canceled(self, drive: Drive, task: FileTask, doing: str) -> None:
        what = "abandoned (shutting down)" if self._stop.is_set() else "CANCELED"
        log(f"drive {drive.index}: {task.path} {what} while {doing} (req {task.request_id})")

    def _copy_to_disk(self, task: FileTask, source: Path) -> None:
        """Copy source to the disk buffer under a temporary name and rename it into place, unless canceled."""
        target = self.disk_path(task.path)
        owner = self.disk_root.stat()
        _make_dirs(target.parent, self.disk_root, owner.st_uid, owner.st_gid)
        temp = target.with_name(f".{target.name}.recall-{uuid.uuid4().hex[:8]}")
        try:
            shutil.copy2(source, temp)
            os.chmod(temp, 0o644)
            _chown(temp, owner.st_uid, owner.st_gid)
            with self._cond:
                if task.state != STARTED:
                    return
                os.replace(temp, target)
                self._finish(task, COMPLETED, time.time())
        finally:
            temp.unlink(missing_ok=True)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _chown(path: Path, uid: int, gid: int) -> None:
    """Give path to uid:gid when we can (as root); otherwise leave it."""
    try:
        st = path.lstat()
        if (st.st_uid, st.st_gid) != (uid, gid):
            os.chown(path, uid, gid)
    except PermissionError:
        pass


def _make_dirs(directory: Path, top: Path, uid: int, gid: int) -> None:
    """mkdir -p directory, giving the directories it creates below top to uid:gid."""
    missing = []
    current = directory
    while current != top and not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        _chown(path, uid, gid)


# --- HTTP ------------------------------------------------------------------------------------------------


class TapeHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server for the tape API; with an SSL context, TLS is set up in the request's thread."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        library: TapeLibrary,
        sitename: str,
        public_base: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        internal: bool = False,
    ) -> None:
        self.library = library
        self.sitename = sitename
        self.public_base = public_base.rstrip("/")
        self.ssl_context = ssl_context
        self.internal = internal
        super().__init__(address, TapeRequestHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.ssl_context is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(30)
        try:
            conn = self.ssl_context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            log(f"TLS handshake with {client_address[0]} failed: {exc}")
            return
        try:
            TapeRequestHandler(conn, client_address, self)
        finally:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


class TapeRequestHandler(BaseHTTPRequestHandler):
    """Routes the Tape REST API, the internal endpoints, /status and file reads."""

    protocol_version = "HTTP/1.1"
    server_version = "TestbedTape/1"
    server: TapeHTTPServer

    # -- plumbing --

    def log_message(self, format: str, *args: Any) -> None:
        log(f"{self.client_address[0]} {format % args}")

    def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_error_json(self, status: int, detail: str) -> None:
        title = HTTPStatus(status).phrase
        self._send_json(status, {"type": "about:blank", "title": title, "status": status, "detail": detail})

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise TapeError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request body too large")
        return self.rfile.read(length) if length > 0 else b""

    def _json_body(self) -> Any:
        body = self._read_body()
        try:
            return json.loads(body or b"null")
        except (ValueError, UnicodeDecodeError) as exc:
            raise TapeError(HTTPStatus.BAD_REQUEST, f"invalid JSON: {exc}") from exc

    def _paths(self, body: Any, key: str = "paths") -> list[str]:
        """A non-empty list of path strings from body[key], normalized."""
        if not isinstance(body, dict) or not isinstance(body.get(key), list) or not body[key]:
            raise TapeError(HTTPStatus.BAD_REQUEST, f'expected a JSON object with a non-empty "{key}" list')
        try:
            return _unique(normalize_path(path) for path in body[key])
        except ValueError as exc:
            raise TapeError(HTTPStatus.BAD_REQUEST, str(exc)) from exc

    def _request_id(self, body: Any) -> str:
        rid = body.get("requestId") if isinstance(body, dict) else None
        if not isinstance(rid, str) or not rid:
            raise TapeError(HTTPStatus.BAD_REQUEST, 'expected a non-empty string "requestId"')
        return rid

    def _route(self, method: str) -> None:
        path = unquote(urlsplit(self.path).path)
        try:
            self._dispatch(method, path)
        except TapeError as exc:
            self._send_error_json(exc.status, exc.detail)
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as exc:
            log(f"error handling {method} {self.path}: {exc!r}")
            self._send_error_json(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {exc}")

    def do_GET(self) -> None:
        self._route("GET")

    def do_HEAD(self) -> None:
        self._route("HEAD")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def do_PROPFIND(self) -> None:
        self._route("PROPFIND")

    def do_OPTIONS(self) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Allow", "GET, HEAD, POST, DELETE, PROPFIND, OPTIONS")
        self.send_header("DAV", "1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    # -- routing --

    def _dispatch(self, method: str, path: str) -> None:
        library = self.server.library
        api = path.rstrip("/")
        if method == "GET" and api == "/.well-known/wlcg-tape-rest-api":
            self._send_json(
                HTTPStatus.OK,
                {
                    "sitename": self.server.sitename,
                    "description": "Emulated tape of the Data Challenge Portal testbed",
                    "endpoints": [{"uri": f"{self.server.public_base}{API_PREFIX}/", "version": "v1", "metadata": {}}],
                },
            )
        elif method == "GET" and api == "/status":
            self._send_json(HTTPStatus.OK, library.status_json())
        elif api == API_PREFIX or api.startswith(API_PREFIX + "/"):
            self._api(method, api[len(API_PREFIX) :].strip("/").split("/"))
        elif api.startswith("/internal/") and self.server.internal:
            self._internal(method, api[len("/internal/") :])
        elif method in ("GET", "HEAD"):
            self._serve_file(path)
        elif method == "PROPFIND":
            self._propfind(path)
        else:
            raise TapeError(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed on {path}")

    def _api(self, method: str, parts: list[str]) -> None:
        library = self.server.library
        match method, parts:
            case "POST", ["stage"]:
                body = self._json_body()
                files = body.get("files") if isinstance(body, dict) else None
                if not isinstance(files, list) or not files:
                    raise TapeError(HTTPStatus.BAD_REQUEST, 'expected a JSON object with a non-empty "files" list')
                if not all(isinstance(item, dict) and "path" in item for item in files):
                    raise TapeError(HTTPStatus.BAD_REQUEST, 'every entry of "files" needs a "path"')
                try:
                    request = library.submit([item["path"] for item in files])
                except ValueError as exc:
                    raise TapeError(HTTPStatus.BAD_REQUEST, str(exc)) from exc
                self._send_json(
                    HTTPStatus.CREATED,
                    {"requestId": request.id},
                    {"Location": f"{self.server.public_base}{API_PREFIX}/stage/{request.id}"},
                )
            case "GET", ["stage", rid]:
                self._send_json(HTTPStatus.OK, library.request_json(rid))
            case "DELETE", ["stage", rid]:
                library.delete(rid)
                self._send_json(HTTPStatus.OK, {"requestId": rid, "deleted": True})
            case "POST", ["stage", rid, "cancel"]:
                paths = self._paths(self._json_body())
                library.get(rid)
                self._send_json(HTTPStatus.OK, {"requestId": rid, "canceled": library.cancel(rid, paths)})
            case "POST", ["release", rid]:
                # gfal2 releases with the id "gfal2-placeholder-id" when it has none: any id is accepted.
                paths = self._paths(self._json_body())
                self._send_json(HTTPStatus.OK, {"requestId": rid, "released": library.evict(paths)})
            case "POST", ["archiveinfo"]:
                paths = self._paths(self._json_body())
                self._send_json(HTTPStatus.OK, library.archiveinfo_json(paths))
            case _:
                raise TapeError(HTTPStatus.NOT_FOUND, f"no such endpoint: {method} {API_PREFIX}/{'/'.join(parts)}")

    def _internal(self, method: str, name: str) -> None:
        library = self.server.library
        if method != "POST":
            raise TapeError(HTTPStatus.METHOD_NOT_ALLOWED, "internal endpoints take POST")
        body = self._json_body()
        if name == "stage":
            request = library.submit(self._paths(body), self._request_id(body))
            self._send_json(HTTPStatus.CREATED, {"requestId": request.id})
        elif name == "query":
            self._send_json(HTTPStatus.OK, library.prepare_query_json(self._request_id(body), self._paths(body)))
        elif name == "cancel":
            rid = self._request_id(body)
            paths = self._paths(body) if body.get("paths") else None  # no paths: the whole request
            self._send_json(HTTPStatus.OK, {"requestId": rid, "canceled": library.cancel(rid, paths, strict=False)})
        elif name == "evict":
            self._send_json(HTTPStatus.OK, {"released": library.evict(self._paths(body))})
        else:
            raise TapeError(HTTPStatus.NOT_FOUND, f"no such internal endpoint: {name}")

    # -- files --

    def _serve_file(self, raw_path: str) -> None:
        """GET/HEAD of a file on the disk buffer, with single byte ranges."""
        try:
            path = normalize_path(raw_path)
        except ValueError as exc:
            raise TapeError(HTTPStatus.BAD_REQUEST, str(exc)) from exc
        disk = self.server.library.disk_path(path)
        if not disk.is_file():
            detail = "file is on tape only: stage it first" if self.server.library.on_tape(path) else "no such file"
            raise TapeError(HTTPStatus.NOT_FOUND, f"{path}: {detail}")
        with open(disk, "rb") as handle:
            stat = os.fstat(handle.fileno())
            size = stat.st_size
            start, end = 0, size - 1
            status = HTTPStatus.OK
            ranged = _parse_range(self.headers.get("Range"), size)
            if ranged == "invalid":
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if isinstance(ranged, tuple):
                start, end = ranged
                status = HTTPStatus.PARTIAL_CONTENT
            length = max(0, end - start + 1)
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Last-Modified", email.utils.formatdate(stat.st_mtime, usegmt=True))
            if status == HTTPStatus.PARTIAL_CONTENT:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.end_headers()
            if self.command == "HEAD":
                return
            handle.seek(start)
            remaining = length
            while remaining > 0:
                chunk = handle.read(min(READ_CHUNK, remaining))
                if not chunk:
                    break
                self.wfile.write(chunk)
                remaining -= len(chunk)

    def _propfind(self, raw_path: str) -> None:
        """A minimal WebDAV PROPFIND (depth 0 or 1) over the union of disk and tape, for clients that stat."""
        self._read_body()
        library = self.server.library
        path = normalize_path(raw_path)
        disk, tape = library.disk_path(path), library.tape_path(path)
        if not disk.exists() and not tape.exists():
            raise TapeError(HTTPStatus.NOT_FOUND, f"{path}: no such file or directory")
        entries = [(path, disk if disk.exists() else tape)]
        if self.headers.get("Depth", "1") != "0" and entries[0][1].is_dir():
            names: set[str] = set()
            for base in (disk, tape):
                if base.is_dir():
                    names.update(child.name for child in base.iterdir() if not child.name.startswith("."))
            for name in sorted(names):
                child = posixpath.join(path, name)
                local = library.disk_path(child)
                entries.append((child, local if local.exists() else library.tape_path(child)))
        responses = "".join(_dav_response(lfn, local) for lfn, local in entries)
        body = f'<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">{responses}</D:multistatus>'
        data = body.encode()
        self.send_response(HTTPStatus.MULTI_STATUS)
        self.send_header("Content-Type", 'application/xml; charset="utf-8"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _dav_response(lfn: str, local: Path) -> str:
    stat = local.stat()
    is_dir = local.is_dir()
    kind = "<D:collection/>" if is_dir else ""
    size = "" if is_dir else f"<D:getcontentlength>{stat.st_size}</D:getcontentlength>"
    href = quote(lfn + ("/" if is_dir and lfn != "/" else ""))
    modified = email.utils.formatdate(stat.st_mtime, usegmt=True)
    return (
        f"<D:response><D:href>{escape(href)}</D:href><D:propstat><D:prop><D:resourcetype>{kind}"
        f"</D:resourcetype>{size}<D:getlastmodified>{modified}</D:getlastmodified></D:prop>"
        f"<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>"
    )


def _parse_range(header: str | None, size: int) -> tuple[int, int] | str | None:
    """(start, end) for a single "bytes=a-b" range, None to send everything, "invalid" when unsatisfiable."""
    if not header:
        return None
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not match or match.group(1) == match.group(2) == "":
        return None  # several ranges or nonsense: answer with the whole file
    first, last = match.groups()
    if first == "":
        start, end = max(0, size - int(last)), size - 1
    else:
        start, end = int(first), min(size - 1, int(last)) if last else size - 1
    if start >= size or start > end:
        return "invalid"
    return start, end


# --- the daemon ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m testbed.tape", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="holds disk/ (the disk buffer) and tape/")
    parser.add_argument("--host", default="127.0.0.1", help="address of the HTTPS server and in its URLs")
    parser.add_argument("--https-port", type=int, required=True, help="port of the Tape REST API over HTTPS")
    parser.add_argument("--control-port", type=int, required=True, help="plain HTTP port on 127.0.0.1")
    parser.add_argument("--cert", type=Path, required=True, help="host certificate (PEM)")
    parser.add_argument("--key", type=Path, required=True, help="host key (PEM)")
    parser.add_argument("--drives", type=int, default=1, help="number of tape drives")
    parser.add_argument("--drive-rate", type=float, default=100e6, help="read rate of a drive, bytes/s")
    parser.add_argument("--mount-time", type=float, default=0.0, help="seconds to switch the tape in a drive")
    parser.add_argument("--stage-delay", type=float, default=0.0, help="seconds before a requested file is eligible")
    parser.add_argument("--sitename", default="TESTBED-TAPE", help="sitename of the Tape REST discovery")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    library = TapeLibrary(args.root, args.drives, args.drive_rate, args.mount_time, args.stage_delay)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(args.cert), str(args.key))
    https = TapeHTTPServer(
        (args.host, args.https_port),
        library,
        args.sitename,
        f"https://{args.host}:{args.https_port}",
        ssl_context=context,
    )
    control = TapeHTTPServer(
        ("127.0.0.1", args.control_port), library, args.sitename, f"http://127.0.0.1:{args.control_port}", internal=True
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log(f"got signal {signum}, stopping")
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    library.start()
    threads = [
        threading.Thread(target=server.serve_forever, args=(0.1,), name=name, daemon=True)
        for name, server in (("https", https), ("control", control))
    ]
    for thread in threads:
        thread.start()
    log(
        f"tape {args.sitename}: root={args.root} https://{args.host}:{args.https_port} "
        f"control=http://127.0.0.1:{args.control_port} drives={args.drives} drive_rate={args.drive_rate:g}B/s "
        f"mount_time={args.mount_time:g}s stage_delay={args.stage_delay:g}s"
    )
    stop.wait()  # the signal handler runs in this thread and sets it
    for server in (https, control):
        server.shutdown()
        server.server_close()
    library.stop()
    log("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
