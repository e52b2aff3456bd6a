"""runs.kinds: one object per kind of run, listed in one registry; a run's parameters typed by its kind (checked by
field, read back from the row, written as its JSON), and a kind added in one module reaching every lookup."""

from __future__ import annotations

import importlib
import pkgutil
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

import runs.kinds
from challenges.choices import ActivityKind
from measure.context import ProbeContext
from runs import tasks
from runs.kinds.base import Grants, ProbeKind, ProbeResult, RunParameters
from runs.kinds.cache import CacheParameters
from runs.kinds.fields import Problems
from runs.kinds.io import IoParameters
from runs.kinds.network import NETWORK, NetworkParameters
from runs.kinds.one_task import OneTaskKind
from runs.kinds.registry import KINDS, kind_for, kind_registered, run_parameters, runnable_kinds
from runs.kinds.staging import StagingParameters
from runs.kinds.transfer import DEFAULT_STALL_TIMEOUT, TRANSFER, TransferParameters
from runs.models import Run
from runs.probes.results import probe_results
from runs.probes.tables import probe_columns, probe_comparison, probe_figures, probe_tables
from runs.selectors import probe_progress
from runs.services import run_start

pytestmark = pytest.mark.django_db


def test_the_registry_lists_every_activity_kind_the_portal_can_run_once() -> None:
    served = runnable_kinds()
    assert sorted(served) == sorted(ActivityKind.values)
    assert len(served) == len(set(served))  # no ActivityKind served by two kinds
    assert all(activity_kind in kind_for(activity_kind).serves for activity_kind in served)  # type: ignore[union-attr]


def test_every_kind_module_of_the_package_is_named_in_the_registry() -> None:
    """Listing the kinds is reading registry.py: a kind defined in a module of runs.kinds but not registered would
    run nowhere."""
    defined = {
        id(value): value.name
        for module in pkgutil.iter_modules(runs.kinds.__path__)
        for value in vars(importlib.import_module(f"runs.kinds.{module.name}")).values()
        if isinstance(value, ProbeKind)
    }
    assert sorted(defined.values()) == sorted(kind.name for kind in KINDS)
    assert set(defined) == {id(kind) for kind in KINDS}


def test_typed_parameters_reject_a_value_out_of_range_by_field() -> None:
    with pytest.raises(ValidationError) as caught:
        NetworkParameters.from_dict({"host": "perf.example.org", "port": 70000})
    assert caught.value.message_dict == {"port": ["port must be from 1 to 65535, not 70000"]}


def test_typed_parameters_say_what_is_required_and_name_an_unknown_field() -> None:
    with pytest.raises(ValidationError) as caught:
        NetworkParameters.from_dict({"hots": "perf.example.org"})
    errors = caught.value.message_dict
    assert errors["host"] == ["host is required: the site's network host (name or address)"]
    assert errors["hots"][0].startswith("unknown parameter 'hots' (known: queue, site, experiment, trigger, host")


def test_typed_transfer_parameters_reject_a_bad_type_and_an_unknown_checksum() -> None:
    with pytest.raises(ValidationError) as caught:
        TransferParameters.from_dict({"streams": "4", "checksum": "SHA1", "keep_copies": "yes"})
    assert caught.value.message_dict == {
        "streams": ["streams must be a whole number, not '4'"],
        "checksum": ["checksum must be one of ADLER32, MD5, CRC32, none, not 'SHA1'"],
        "keep_copies": ["keep_copies must be true or false, not 'yes'"],
    }


COMMON: dict[str, Any] = {"queue": "site.TB-A", "site": "TB-A", "experiment": "ATLAS", "trigger": "user"}
EXAMPLES: list[RunParameters] = [
    TransferParameters(
        **COMMON,
        copy_mode="native",
        streams=2,
        timeout=600,
        stall_timeout=0,
        first_byte_timeout=120,
        concurrency=10,
        checksum="MD5",
        keep_copies=True,
        source="root://a.example.org:1094//data",
        destinations=["root://b.example.org:1094//data", "root://c.example.org:1094//data"],
        file_size=10**9,
        file_count=20,
    ),
    TransferParameters(**COMMON, concurrency=2),  # explicit pairs: no source, destinations, size nor count
    NetworkParameters(**COMMON, host="perf.example.org", port=5202, streams=4, duration=30, reverse=True),
    IoParameters(**COMMON, endpoint="davs://a.example.org:8443/data", file_size=10**6, timeout=60),
    CacheParameters(**COMMON, origin_urls=["root://o.example.org//f1"], cache_url="root://cache.example.org:1094"),
    StagingParameters(
        **COMMON,
        urls=["davs://tape.example.org:8443/data/f1", "davs://tape.example.org:8443/data/f2"],
        bulk_size=100,
        pin_time=600,
        timeout=1800,
        poll_interval=0.5,
        endpoint="davs://tape.example.org:8443/data",
        recalls_runs=[3, 4],
    ),
]


@pytest.mark.parametrize("parameters", EXAMPLES, ids=lambda p: type(p).__name__)
def test_typed_parameters_make_the_round_trip_through_their_json(parameters: RunParameters) -> None:
    stored = parameters.to_dict()
    assert type(parameters).from_dict(stored) == parameters
    assert type(parameters).stored(stored) == parameters


def test_a_plan_the_kind_leaves_unchosen_is_not_written() -> None:
    stored = TransferParameters(concurrency=2).to_dict()
    assert {"source", "destinations", "file_size", "file_count"}.isdisjoint(stored)
    assert StagingParameters(urls=["root://t.example.org//f"]).to_dict().keys().isdisjoint({"endpoint", "recall_run"})


def test_a_row_from_before_a_field_reads_its_default_and_a_mistyped_value_never_raises() -> None:
    old = TransferParameters.stored({"timeout": 900, "concurrency": 4, "streams": "four", "gone": 1})
    assert (old.timeout, old.concurrency, old.streams) == (900, 4, 1)
    assert old.stall_timeout == DEFAULT_STALL_TIMEOUT  # runs made before the stall guard
    assert TransferParameters.stored(None) == TransferParameters()


def test_a_started_run_reads_back_what_its_kind_wrote(sent: list[Any], coordinator: Any) -> None:
    run = run_start(user=coordinator, kind="network", parameters={"host": "127.0.0.1", "port": 5201, "duration": 5})
    parameters = run_parameters(run)
    assert isinstance(parameters, NetworkParameters)
    assert (parameters.host, parameters.port, parameters.duration, parameters.streams) == ("127.0.0.1", 5201, 5, 1)
    assert parameters.to_dict() == run.parameters
    assert NETWORK.parameters(run).queue == run.parameters["queue"]


def test_an_ad_hoc_transfer_of_explicit_pairs_reads_back_what_it_wrote(sent: list[Any], coordinator: Any) -> None:
    pairs = [{"source": "root://a.example.org//f", "destination": "root://b.example.org//g"}]
    run = run_start(user=coordinator, kind="transfer", parameters={"files": pairs, "concurrency": 3})
    assert TRANSFER.parameters(run).to_dict() == run.parameters
    assert (TRANSFER.parameters(run).concurrency, TRANSFER.parameters(run).source) == (3, None)


# --- a kind added in one module ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class EchoParameters(RunParameters):
    """A kind made for this test: it "measures" the length of a text."""

    text: str = ""

    @classmethod
    def check(cls, given: dict[str, Any], problems: Problems) -> dict[str, Any]:
        text = given.get("text")
        if not isinstance(text, str) or not text:
            problems.add("text", "text is required: what to echo")
        return {"text": text}


class EchoKind(OneTaskKind[EchoParameters]):
    name = "echo"
    serves: ClassVar[tuple[str, ...]] = ("echo",)
    Parameters = EchoParameters
    given = frozenset({"text"})
    columns = ("length",)
    compared = "length"

    def probe(
        self, parameters: EchoParameters, context: ProbeContext, grants: Grants, cancelled: threading.Event
    ) -> ProbeResult:
        return [], {"echoed": parameters.text, "length": len(parameters.text)}, ""

    def rows(self, run: Run, summary: dict[str, Any], *, match: Any) -> list[dict[str, Any]]:
        return [{"length": summary["length"]}]

    def results(self, run: Run, summary: dict[str, Any]) -> dict[str, Any] | None:
        return {"kind": "echo", "echoed": summary["echoed"]}

    def describe(self, parameters: EchoParameters) -> tuple[str, float | None]:
        return f"Echoing {parameters.text!r}", 1.0

    def target(self, parameters: EchoParameters) -> str:
        return parameters.text


def test_a_kind_registered_in_one_place_is_planned_run_tabled_and_shown(sent: list[Any], coordinator: Any) -> None:
    echo = EchoKind()
    with kind_registered(echo):
        with pytest.raises(ValidationError) as caught:
            run_start(user=coordinator, kind="echo", parameters={"text": ""})
        assert caught.value.message_dict == {"text": ["text is required: what to echo"]}

        run = run_start(user=coordinator, kind="echo", parameters={"text": "hello"})
        assert probe_progress(run, now=timezone.now()).what == "Echoing 'hello'"
        tasks.run_probe(run.pk)  # runs.tasks finds its probe in the registry
        run.refresh_from_db()
        assert (run.state, run.summary) == ("finished", {"echoed": "hello", "length": 5})

        tables = probe_tables([run])
        assert probe_columns()["echo"] == ["run", "activity", "started_at", "target", "length"]
        assert tables["echo"] == [
            {"run": run.pk, "activity": None, "started_at": run.started_at, "target": "hello", "length": 5}
        ]
        assert [(c.kind, c.figure, c.now) for c in probe_comparison(tables, tables) if c.kind == "echo"] == [
            ("echo", "length", 5.0)
        ]
        assert probe_results(run) == {"kind": "echo", "echoed": "hello"}
        assert probe_figures(probe_results(run)) == []
    assert "echo" not in probe_columns()
    assert kind_for("echo") is None
