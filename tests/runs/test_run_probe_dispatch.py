"""runs.tasks.run_probe: one probe per kind of one-task run (the PROBES table), the run ended by what it gave."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from runs import tasks
from runs.models import Run
from tests.challenges.factories import ActivityFactory

pytestmark = pytest.mark.django_db


def queued_run(kind: str) -> Run:
    return Run.objects.create(activity=ActivityFactory(kind=kind), kind=kind, state="queued", parameters={"x": 1})


def test_each_one_task_kind_has_its_probe() -> None:
    assert set(tasks.PROBES) == {"staging", "network", "cache", "io"}


def test_a_run_gets_its_kinds_probe_with_its_parameters_and_stores_its_summary(monkeypatch: Any) -> None:
    run = queued_run("io")
    asked: list[dict[str, Any]] = []

    def probe(run: Run, context: Any, cancelled: threading.Event) -> tasks.ProbeResult:
        asked.append(run.parameters)
        return [], {"rate": 5.0}, ""

    monkeypatch.setitem(tasks.PROBES, "io", probe)
    tasks.run_probe(run.pk)

    run.refresh_from_db()
    assert asked == [{"x": 1}]
    assert (run.state, run.summary) == ("finished", {"rate": 5.0})


def test_a_probe_that_raises_fails_its_run_with_the_reason(monkeypatch: Any) -> None:
    run = queued_run("network")

    def probe(run: Run, context: Any, cancelled: threading.Event) -> tasks.ProbeResult:
        raise RuntimeError("no route to host")

    monkeypatch.setitem(tasks.PROBES, "network", probe)
    tasks.run_probe(run.pk)

    run.refresh_from_db()
    assert run.state == "failed"
    assert "network probe failed: no route to host" in run.message
