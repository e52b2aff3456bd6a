"""The tape library: its namespace (disk buffer and tape copies), the stage requests and the drive threads that
recall files from tape."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from .catalog import TapeCatalog
from .migration import MigrationMixin
from .model import (
    CANCELED,
    COMPLETED,
    EARLY_CANCEL_TTL,
    FAILED,
    FINAL_STATES,
    NOT_ON_TAPE,
    STARTED,
    SUBMITTED,
    Drive,
    FileTask,
    StageRequest,
    TapeError,
    log,
    normalize_path,
)
from .model import (
    chown as _chown,
)
from .model import (
    make_dirs as _make_dirs,
)
from .model import (
    unique as _unique,
)


class TapeLibrary(MigrationMixin):
    """The emulated tape: stage requests, a queue and the drives that serve it, and the migration of what is written
    into the disk buffer onto tape. Thread-safe.

    - Migration (migration_delay not None): a file written into the disk buffer and left unchanged for
      migration_delay seconds is copied to tape; then (evict="migrated", the default) its disk copy is removed, so
      that a later recall really comes from tape. With evict="lru" the buffer keeps migrated files until it holds
      more than buffer_bytes, then removes the least recently used ones that are on tape.
    - Recalls: a drive reads the files of one request tape by tape (after the file it read, the next eligible file
      of the same request on the tape it holds), otherwise first in, first out; a tape switch costs mount_time.
    - A stage request of more than max_request_files files (0: no limit) is refused with the limit.
    """

    def __init__(
        self,
        root: Path,
        drives: int = 1,
        drive_rate: float = 100e6,
        mount_time: float = 0.0,
        stage_delay: float = 0.0,
        *,
        migration_delay: float | None = None,
        evict: str = "migrated",
        buffer_bytes: int = 0,
        max_request_files: int = 0,
        tape_capacity: int = 0,
    ) -> None:
        if drives < 1 or drive_rate <= 0 or mount_time < 0 or stage_delay < 0:
            raise ValueError("need drives >= 1, drive_rate > 0, mount_time >= 0 and stage_delay >= 0")
        if migration_delay is not None and migration_delay < 0:
            raise ValueError("migration_delay is >= 0 seconds, or None for no migration")
        if evict not in ("migrated", "lru") or buffer_bytes < 0 or max_request_files < 0:
            raise ValueError('evict is "migrated" or "lru"; buffer_bytes and max_request_files are >= 0')
        self.migration_delay = migration_delay
        self.evict_policy = evict
        self.buffer_bytes = int(buffer_bytes)
        self.max_request_files = int(max_request_files)
        self.migrated = 0
        self.evicted = 0
        self._migrated_at: dict[str, float] = {}  # path -> when it reached tape, until it leaves the buffer
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
        self.catalog = TapeCatalog(self.tape_root / ".catalog.json", tape_capacity)

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
        """Start the drive threads (and the migrator, when migration is on)."""
        for drive in self.drives:
            thread = threading.Thread(target=self._drive_loop, args=(drive,), name=f"drive-{drive.index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.migration_delay is not None:
            thread = threading.Thread(target=self._migrate_loop, name="migrator", daemon=True)
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
        if self.max_request_files and len(normalized) > self.max_request_files:
            raise TapeError(
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                f"a stage request takes at most {self.max_request_files} files, not {len(normalized)}: split it",
            )
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
                task = FileTask(path, rid, now, now + self.stage_delay, tape_label=self.catalog.tape_of(path))
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
                "migrated": self.migrated,
                "tapes": self.catalog.summary(),
                "evicted": self.evicted,
                "buffer_bytes_used": self._buffer_used(),
                "config": {
                    "drives": len(self.drives),
                    "drive_rate": self.drive_rate,
                    "mount_time": self.mount_time,
                    "stage_delay": self.stage_delay,
                    "migration_delay": self.migration_delay,
                    "evict": self.evict_policy,
                    "buffer_bytes": self.buffer_bytes,
                    "max_request_files": self.max_request_files,
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

    def _next_task(self, now: float, drive: Drive | None = None) -> tuple[FileTask | None, float | None]:
        """The next file for a drive: an eligible file of the request it last read on the tape it holds, else the
        first eligible file no drive is reading; or None and how long to wait (caller holds the lock)."""
        if drive is not None and drive.tape is not None and drive.last_request is not None:
            for task in self.queue:
                if (
                    task.request_id == drive.last_request
                    and task.tape == drive.tape
                    and task.eligible <= now
                    and task.path not in self._reading
                ):
                    return task, None
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
                task, wait = self._next_task(time.time(), drive)
                if task is None:
                    self._cond.wait(wait)
                    continue
                self.queue.remove(task)
                task.state = STARTED
                task.started = time.time()
                drive.task = task
                drive.last_request = task.request_id
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
