"""The portal's workers and a site's agent run the same code for the one-task probes: each kind's `probe` and the
agent's job call measure.probes' function for that kind, and a job's payload (the kind's `to_dict`) gives that
function every parameter it takes."""

from __future__ import annotations

import dataclasses
import inspect
import threading
from typing import Any

import pytest

from agent import KINDS as AGENT_KINDS
from agent.config import Credentials
from agent.context import AgentProbeContext
from agent.work import Running, job_run
from common import processes
from measure.context import ProbeContext
from measure.probes import PROBES, probe_run
from runs.kinds.registry import KINDS, kind_named

ONE_TASK = [kind for kind in KINDS if not kind.per_file]


def test_every_one_task_kind_has_its_function_in_measure_and_the_agent_runs_every_one() -> None:
    assert {kind.name for kind in ONE_TASK} == set(PROBES)
    assert set(PROBES) <= set(AGENT_KINDS)


@pytest.mark.parametrize("kind", ONE_TASK, ids=lambda kind: kind.name)
def test_a_kinds_parameters_name_every_parameter_of_its_measure_function(kind: Any) -> None:
    taken = {p.name: p for p in inspect.signature(PROBES[kind.name]).parameters.values() if p.kind is p.KEYWORD_ONLY}
    fields = {field.name for field in dataclasses.fields(kind.Parameters)}
    assert set(taken) <= fields, set(taken) - fields
    # The kind's probe passes them by the same names: its source calls the function.
    assert f"{PROBES[kind.name].__name__}(" in inspect.getsource(type(kind).probe)


def test_the_kind_and_the_agent_give_the_same_result_for_the_same_network_probe() -> None:
    port = processes.free_port(29900)  # nothing listens: iperf3 is refused at once, tracepath still runs
    network = kind_named("network")
    assert network is not None
    parameters = network.Parameters(host="127.0.0.1", port=port, duration=1)
    portal = network.probe(parameters, ProbeContext(), [], threading.Event())
    direct = probe_run("network", ProbeContext(), [], threading.Event(), {**parameters.to_dict(), "queue": "x"})
    job = {"id": 1, "kind": "probe", "probe": "network", "parameters": parameters.to_dict(), "grants": []}
    agent = job_run(Running(job), AgentProbeContext(Credentials()))

    for files, summary, error in (portal, direct, (agent["outcomes"], agent["summary"], agent["error"])):
        assert files == [] and error.startswith("network probe failed: ") and summary["port"] == port, error
        assert (summary["host"], summary["ok"]) == ("127.0.0.1", False)
    assert portal[2] == direct[2] == agent["error"]
