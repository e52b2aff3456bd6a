"""A worker with a threads pool has gfal2's plugins loaded before its first task (portal.celery's worker_init)."""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings

from common import processes
from tests.workers import worker_argv


def mapped(pid: int, library: str) -> bool:
    return library in Path(f"/proc/{pid}/maps").read_text()


def test_a_threads_worker_loads_gfal2s_plugins_before_any_task(tmp_path: Path) -> None:
    pidfile, log = tmp_path / "worker.pid", tmp_path / "worker.log"
    processes.start(worker_argv(name="gfal2-init", queues="test-gfal2-init-unused"), pidfile=pidfile, logfile=log,
                    cwd=settings.BASE_DIR)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while " ready." not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert " ready." in log.read_text(), log.read_text()[-2000:]
        pid = int(pidfile.read_text())
        # No task was sent to its queue: the xrootd plugin is there because the worker loaded gfal2 as it started.
        assert mapped(pid, "libgfal_plugin_xrootd"), "gfal2's xrootd plugin is not loaded in the worker"
    finally:
        processes.stop(pidfile)
