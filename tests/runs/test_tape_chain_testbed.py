"""The tape chain on the real testbed (issue 18's measure): with one 20 MB/s drive and a 3 s mount, ATLAS DT writes
8 x 20 MB into TB-TAPE; once they have migrated to tape (and left the buffer), the ATLAS A-DT recalls exactly those
8 files through the Tape REST door with gfal2. It must take at least mount + bytes / rate = 3 + 160 MB / 20 MB/s =
11 s, end finished, and say that all 8 came from tape. And a recall whose worker is killed fails as worker lost."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from challenges.choices import ActivityKind
from challenges.models import Activity, Challenge, Target
from common import processes
from runs.models import Run, RunFile
from runs.services import run_start
from sites.models import Experiment, Site
from testbed.client import gfal2_context
from testbed.grid import Testbed

from .helpers import wait_for, wait_for_run_end, wait_for_worker_lost

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

MB = 10**6


@pytest.fixture
def one_slow_drive(registry: Testbed) -> Iterator[Testbed]:
    """The tape daemon restarted with one 20 MB/s drive, a 3 s mount and a 2 s migration delay; then as it was."""
    registry.down(only=["tape-rest"])
    slow = Testbed(
        replace(
            registry.config,
            tape_drives=1,
            tape_drive_rate=20e6,
            tape_mount_time=3.0,
            tape_migration_delay=2.0,
        )
    )
    try:
        slow.up()
        yield slow
    finally:
        slow.down(only=["tape-rest"])
        registry.up()


def _localities(context: Any, urls: list[str]) -> list[str]:
    found = []
    for url in urls:
        try:
            found.append(str(context.getxattr(url, "user.status")))
        except Exception as exc:
            found.append(f"error: {exc}")
    return found


def test_a_recall_of_what_dt_wrote_comes_from_tape_at_the_drives_pace(
    one_slow_drive: Testbed, coordinator: Any, worker: Path, cleanup: list[Run]
) -> None:
    atlas = Experiment.objects.get(name="ATLAS")
    tape_site = Site.objects.get(name="TB-TAPE")
    challenge = Challenge.objects.create(
        name="TC", slug="tc-chain", start=datetime(2026, 1, 5, tzinfo=UTC), end=datetime(2026, 1, 26, tzinfo=UTC)
    )
    write = Activity.objects.create(
        challenge=challenge, name="ATLAS DT", experiment=atlas, mode="DT", kind=ActivityKind.TAPE_WRITE,
        start=challenge.start, end=challenge.end, source=Site.objects.get(name="TB-T0"),
        file_size=20 * MB, file_count=8, concurrency=4,
    )  # fmt: skip
    Target.objects.create(activity=write, site=tape_site, direction="in", rate=1e9)
    dt = run_start(user=coordinator, activity=write)
    cleanup.append(dt)
    wait_for_run_end(dt, 120)
    assert dt.state == "finished", dt.message

    # Migration: within a few seconds every written file is on tape only (NEARLINE), its buffer copy gone.
    rest, root = (
        one_slow_drive.endpoint("tape.rest").url.rstrip("/"),
        one_slow_drive.endpoint("tape.root").url.rstrip("/"),
    )
    written = sorted(
        url.replace(root, rest) for url in RunFile.objects.filter(run=dt).values_list("destination_url", flat=True)
    )
    context = gfal2_context(one_slow_drive)
    deadline = time.monotonic() + 60
    while set(_localities(context, written)) != {"NEARLINE"}:
        assert time.monotonic() < deadline, _localities(context, written)
        time.sleep(0.5)

    recall = Activity.objects.create(
        challenge=challenge, name="ATLAS A-DT", experiment=atlas, mode="A-DT", kind=ActivityKind.STAGING,
        start=challenge.start, end=challenge.end, file_count=8,
    )  # fmt: skip
    Target.objects.create(activity=recall, site=tape_site, direction="out", rate=1e9)
    staging = run_start(user=coordinator, activity=recall, parameters={"poll_interval": 0.5, "timeout": 180})
    cleanup.append(staging)
    assert sorted(staging.parameters["urls"]) == written  # exactly what the DT wrote
    wait_for_run_end(staging, 240)
    assert staging.state == "finished", staging.message
    summary = staging.summary
    assert (summary["staged"], summary["files_from_tape"], summary["files_already_online"]) == (8, 8, 0)
    assert summary["seconds"] >= 11.0, summary["seconds"]  # mount 3 s + 160 MB at 20 MB/s
    assert summary["tape_rate"] <= 20e6 * 1.05, summary["tape_rate"]
    assert summary["mounts"] == 1  # one run's files: one tape, read in one mount
    status = one_slow_drive.tape_rest_status()
    assert status["drives"][0]["mounts"] >= 1 and status["migrated"] >= 8


@override_settings(DISPATCH_WORKER_LOST_AFTER=5)
def test_a_recall_whose_worker_is_killed_fails_as_worker_lost(
    one_slow_drive: Testbed, coordinator: Any, worker: Path
) -> None:
    directory = f"staging/killed-{uuid.uuid4().hex}"
    paths = [f"{directory}/f{index}" for index in range(4)]
    for path in paths:
        one_slow_drive.tape_put(path, os.urandom(20 * MB))  # 4 s a file on the one drive, after a 3 s mount
    urls = [one_slow_drive.url("tape.rest", path) for path in paths]
    run = run_start(user=coordinator, kind="staging", parameters={"urls": urls, "poll_interval": 0.5, "timeout": 120})
    wait_for(lambda: Run.objects.get(pk=run.pk).heartbeat is not None, 30, "the recall to start beating")
    os.kill(processes.read_pid(worker) or 0, signal.SIGKILL)
    wait_for_worker_lost(run, 30)
    assert run.state == "failed" and run.message.startswith("worker lost"), run.message
