"""The tape's side of writes: what lands in the disk buffer goes to tape once nobody changes it, onto tapes of a
fixed capacity (the catalog), and leaves the buffer by the eviction policy. A mixin of TapeLibrary."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .catalog import TapeCatalog
from .model import COMPLETED, STARTED, SUBMITTED, chown, log, make_dirs


class MigrationMixin:
    """Migration and eviction; needs the TapeLibrary's roots, lock, requests, policy settings and catalog."""

    disk_root: Path
    tape_root: Path
    migration_delay: float | None
    evict_policy: str
    buffer_bytes: int
    migrated: int
    evicted: int
    requests: dict[str, Any]
    catalog: TapeCatalog
    _migrated_at: dict[str, float]
    _cond: Any
    _stop: Any

    if TYPE_CHECKING:  # TapeLibrary's

        def disk_path(self, path: str) -> Path: ...

        def tape_path(self, path: str) -> Path: ...

        def on_tape(self, path: str) -> bool: ...

    def _buffer_files(self) -> list[Path]:
        return [
            path
            for path in self.disk_root.rglob("*")
            if path.is_file() and not path.name.startswith(".") and ".recall-" not in path.name
        ]

    def _buffer_used(self) -> int:
        total = 0
        for path in self._buffer_files():
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue
        return total

    def _lfn(self, disk: Path) -> str:
        return "/" + str(disk.relative_to(self.disk_root))

    def migrate_once(self, now: float | None = None) -> list[str]:
        """Copy to tape the buffer's files not on tape that nobody changed for migration_delay seconds, evict by
        the policy; returns the paths migrated."""
        now = time.time() if now is None else now
        delay = self.migration_delay or 0.0
        migrated = []
        found = []
        for disk in self._buffer_files():
            try:
                found.append((disk.stat(), disk))
            except FileNotFoundError:
                continue
        # Oldest first, as a tape system writes them (the catalog fills tapes in this order).
        for stat, disk in sorted(found, key=lambda entry: (entry[0].st_mtime, str(entry[1]))):
            lfn = self._lfn(disk)
            tape = self.tape_path(lfn)
            if now - stat.st_mtime < delay or (tape.is_file() and tape.stat().st_size == stat.st_size):
                continue
            owner = self.tape_root.stat()
            make_dirs(tape.parent, self.tape_root, owner.st_uid, owner.st_gid)
            temp = tape.with_name(f".{tape.name}.migrate-{uuid.uuid4().hex[:8]}")
            try:
                shutil.copy2(disk, temp)
                if disk.stat().st_mtime != stat.st_mtime:  # written to meanwhile: next time
                    continue
                chown(temp, owner.st_uid, owner.st_gid)
                os.replace(temp, tape)
            except FileNotFoundError:
                continue
            finally:
                temp.unlink(missing_ok=True)
            label = self.catalog.assign(lfn, stat.st_size)
            self.migrated += 1
            self._migrated_at[lfn] = now
            migrated.append(lfn)
            log(f"migrated {lfn} to tape {label} ({stat.st_size} bytes)")
        if self.evict_policy == "migrated":
            # A migrated file leaves the buffer a migration delay later: whoever wrote it may still be closing or
            # checksumming it (XRootD checksums a third-party copy once it has landed).
            for lfn, when in list(self._migrated_at.items()):
                if now - when >= delay:
                    del self._migrated_at[lfn]
                    if self.on_tape(lfn) and not self._staged_recently(lfn):
                        self._evict_one(self.disk_path(lfn), lfn, "after migration")
        elif self.buffer_bytes:
            self._evict_lru()
        return migrated

    def _staged_recently(self, lfn: str) -> bool:
        """Whether a stage request asked for the file and has not been released (its copy is wanted online)."""
        with self._cond:
            return any(
                lfn in request.files and request.files[lfn].state in (SUBMITTED, STARTED, COMPLETED)
                for request in self.requests.values()
            )

    def _evict_one(self, disk: Path, lfn: str, why: str) -> None:
        try:
            disk.unlink()
        except FileNotFoundError:
            return
        self.evicted += 1
        log(f"evicted {lfn} from the disk buffer ({why})")

    def _evict_lru(self) -> None:
        """Least recently used first, files on tape only, until the buffer holds no more than buffer_bytes."""
        entries = []
        for disk in self._buffer_files():
            try:
                stat = disk.stat()
            except FileNotFoundError:
                continue
            entries.append((max(stat.st_atime, stat.st_mtime), stat.st_size, disk))
        used = sum(size for _, size, _ in entries)
        for _, size, disk in sorted(entries, key=lambda entry: entry[0]):
            if used <= self.buffer_bytes:
                break
            lfn = self._lfn(disk)
            if self.on_tape(lfn) and not self._staged_recently(lfn):
                self._evict_one(disk, lfn, f"buffer over {self.buffer_bytes} bytes")
                used -= size

    def _migrate_loop(self) -> None:
        interval = min(max((self.migration_delay or 0.0) / 2, 0.2), 2.0)
        while not self._stop.wait(interval):
            try:
                self.migrate_once()
            except Exception as exc:  # keep migrating: a file that vanished mid-copy is the next pass's
                log(f"migration pass failed: {exc!r}")
