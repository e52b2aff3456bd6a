"""Fixtures of the runs tests that run on the testbed with real workers."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common import processes
from runs import dispatch
from runs.dispatch import served_queues_forget
from runs.models import Run
from sites.roles import membership_grant
from sites.services import sites_import
from testbed.grid import Testbed
from tests.runs.helpers import purge_default_queue, start_worker
from tests.sites.factories import UserFactory


@pytest.fixture
def registry(testbed: Testbed) -> Testbed:
    """The testbed's sites and endpoints in the registry, so records find their sites."""
    sites_import(document=testbed.sites_document())
    return testbed


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coordinator")
    membership_grant(user=user, role="coordinator")
    return user


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[Path]:
    """One worker on the default queue with room for 40 copies."""
    purge_default_queue()
    served_queues_forget()
    pidfile = start_worker(tmp_path, "w-default", concurrency=44)
    try:
        yield pidfile
    finally:
        processes.stop(pidfile)
        served_queues_forget()


@pytest.fixture
def cleanup(testbed: Testbed) -> Iterator[list[Run]]:
    """Runs whose destination files are removed after the test (the testbed's disks are small)."""
    started: list[Run] = []
    yield started
    for run in started:
        for site in ("t1a", "t1b", "webdav", "tape"):
            # The tape site keeps its buffer in disk/data and its tape copies in tape/data.
            for data in testbed.site_dir(site).glob(f"**/portal-runs/{run.directory or 'none'}"):
                shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """The tasks the code would send, recorded instead."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(dispatch, "prepare_send", lambda *args, **_: sent.append(("prepare", args)))
    monkeypatch.setattr(dispatch, "file_send", lambda *args, **_: sent.append(("file", args)))
    monkeypatch.setattr(dispatch, "copies_delete_send", lambda *args: sent.append(("copies", args)))
    monkeypatch.setattr(dispatch, "served_queues", set)
    return sent
