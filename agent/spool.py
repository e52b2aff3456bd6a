"""Results not yet delivered, on disk: one file per job try, written atomically (a temporary name, fsync, rename),
removed once the portal has it. The agent dying or the portal away loses nothing; a result sent twice is stored
once by the portal (it keys results by job and attempt), so delivering again after a crash doubles nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


class Spool:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.rejected = self.directory / "rejected"
        self.rejected.mkdir(parents=True, exist_ok=True)

    def _path(self, job_id: int, attempt: int) -> Path:
        return self.directory / f"job-{job_id}-{attempt}.json"

    def put(self, job_id: int, attempt: int, result: dict[str, Any]) -> Path:
        """Keep a job's result until it is delivered (atomic: a reader sees the whole file or none)."""
        path = self._path(job_id, attempt)
        temporary = path.with_suffix(".tmp")
        with temporary.open("w") as handle:
            json.dump({"job": job_id, "attempt": attempt, "result": result}, handle, default=str)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return path

    def pending(self) -> list[tuple[int, int, dict[str, Any]]]:
        """Every result waiting for delivery, oldest job first."""
        found = []
        for path in sorted(self.directory.glob("job-*.json"), key=lambda p: int(p.stem.split("-")[1])):
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being replaced, or removed, at this moment
            found.append((int(entry["job"]), int(entry["attempt"]), dict(entry["result"])))
        return found

    def delivered(self, job_id: int, attempt: int) -> None:
        self._path(job_id, attempt).unlink(missing_ok=True)

    def reject(self, job_id: int, attempt: int) -> None:
        """The portal refused it for good (not this site's job, not a result of it): kept apart for the operator."""
        path = self._path(job_id, attempt)
        if path.exists():
            os.replace(path, self.rejected / path.name)
