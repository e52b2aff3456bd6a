"""Which tape (cartridge) each migrated file is on: tapes of a fixed capacity, filled in the order files migrate, as a
tape system writes them; kept in DIR/tape/.catalog.json so that it outlives the daemon. A file the catalog does not
know (put on tape by hand, or with no capacity set) is on the tape named after its directory."""

from __future__ import annotations

import json
import os
import posixpath
import threading
from pathlib import Path
from typing import Any


class TapeCatalog:
    def __init__(self, path: Path, capacity: int = 0) -> None:
        if capacity < 0:
            raise ValueError("a tape's capacity is >= 0 bytes (0: a file's tape is its directory)")
        self.path = path
        self.capacity = int(capacity)
        self._lock = threading.Lock()
        self.files: dict[str, str] = {}
        self.used: dict[str, int] = {}
        if path.is_file():
            data = json.loads(path.read_text())
            self.files, self.used = dict(data.get("files", {})), {k: int(v) for k, v in data.get("used", {}).items()}

    def tape_of(self, lfn: str) -> str:
        return self.files.get(lfn) or posixpath.dirname(lfn)

    def assign(self, lfn: str, size: int) -> str:
        """The tape a file migrating now goes to: the newest tape while it has room, else a new one."""
        if not self.capacity:
            return posixpath.dirname(lfn)
        with self._lock:
            if lfn in self.files:
                return self.files[lfn]
            label = max(self.used, default="")
            if not label or (self.used[label] and self.used[label] + size > self.capacity):
                label = f"T{len(self.used) + 1:05d}"
                self.used[label] = 0
            self.used[label] += size
            self.files[lfn] = label
            self._save()
            return label

    def _save(self) -> None:
        temp = self.path.with_name(f".{self.path.name}.tmp")
        temp.write_text(json.dumps({"files": self.files, "used": self.used}))
        os.replace(temp, self.path)

    def summary(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "tapes": len(self.used), "files": len(self.files)}
