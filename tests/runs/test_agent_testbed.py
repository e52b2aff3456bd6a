"""A site's agent end to end, all real: the portal served by gunicorn on the test database, the agent as its own
process (`python -m agent --config FILE`) with an empty environment but PATH, copying between the testbed's servers
and running iperf3 against its iperf3 server; no Celery worker anywhere. It runs a 10-file transfer and an iperf3
run, both ending with `agent` set; and with the portal stopped for AGENT_OUTAGE_SECONDS (60 unless set) while it
runs a 20-file run, it loses nothing and doubles nothing once the portal is back."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.core.management import call_command

from agent import KINDS, VERSION
from common import processes
from results.models import NetworkMeasurement, TransferRecord
from runs.choices import RUN_ENDED
from runs.models import AgentJob, Run, RunFile
from runs.services import run_start
from sites.models import Site, SiteAgent
from testbed.grid import Testbed
from tests.runs.helpers import wait_for, wait_for_run_end
from tests.testbed.helpers import PortalServer as Portal
from tests.testbed.helpers import logs

pytestmark = [pytest.mark.testbed, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

MB = 1024 * 1024
OUTAGE = float(os.environ.get("AGENT_OUTAGE_SECONDS", "60"))


@pytest.fixture
def portal(tmp_path: Path) -> Iterator[Portal]:
    server = Portal(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def agent_of(registry: Testbed, portal: Portal, tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Enrol and start the agent of a site: `manage.py agent_enroll`'s file, with the testbed's CA and bearer token
    as the site's credentials, run with nothing in its environment but PATH. Returns its spool directory."""
    pidfiles: list[Path] = []

    def start(site: str) -> Path:
        config_path, spool = tmp_path / f"{site}.json", tmp_path / f"spool-{site}"
        call_command(
            "agent_enroll", site, "--portal-url", portal.url, "--output", str(config_path), "--spool", str(spool)
        )
        config = json.loads(config_path.read_text())
        config["heartbeat"] = 1
        config["credentials"] = {
            "x509_cert_dir": str(registry.pki.cert_dir),
            "bearer_token": registry.config.bearer_token,
            "bearer_prefixes": list(registry.https_prefixes()),
        }
        config_path.write_text(json.dumps(config))
        pidfile = tmp_path / f"agent-{site}.pid"
        argv = [sys.executable, "-m", "agent", "--config", str(config_path), "--log-level", "DEBUG"]
        processes.start(
            argv,
            pidfile=pidfile,
            logfile=tmp_path / f"agent-{site}.log",
            env={"PATH": os.environ["PATH"]},
            cwd=settings.BASE_DIR,
        )
        pidfiles.append(pidfile)
        return spool

    yield start
    for pidfile in pidfiles:
        processes.stop(pidfile, timeout=10)


def remote_ports(pid: int) -> set[int]:
    """The remote ports of the TCP connections the process holds now (its socket inodes in its network namespace's
    tables)."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(descriptor)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def transfer(user: Any, cleanup: list[Run], registry: Testbed, files: int, concurrency: int) -> Run:
    run = run_start(
        user=user,
        kind="transfer",
        parameters={
            "source": registry.endpoint("t0.root").url,
            "destinations": [registry.endpoint("t1a.root").url],
            "file_size": 4 * MB,
            "file_count": files,
            "concurrency": concurrency,
            "experiment": "ATLAS",
            "timeout": 60,
        },
    )
    cleanup.append(run)
    return run


def test_an_agent_runs_a_ten_file_transfer_run_from_its_site_and_never_connects_to_the_database_or_redis(
    registry: Testbed, coordinator: Any, cleanup: list[Run], agent_of: Callable[[str], Path], portal: Portal
) -> None:
    tmp_path = portal.directory
    agent_of("TB-T0")
    pid = processes.read_pid(tmp_path / "agent-TB-T0.pid")
    assert pid is not None
    run = transfer(coordinator, cleanup, registry, files=10, concurrency=5)
    seen: set[int] = set()

    def ended_while_watching_sockets() -> bool:
        seen.update(remote_ports(pid))
        return Run.objects.filter(pk=run.pk, state__in=RUN_ENDED).exists()

    try:
        wait_for(ended_while_watching_sockets, 120, lambda: logs(tmp_path), interval=0.05)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{logs(tmp_path)}") from None
    run.refresh_from_db()

    assert run.state == "finished", f"{run.message}\n{logs(tmp_path)}"
    assert run.agent is not None
    assert (run.parameters["queue"], run.agent.site.name) == ("agent.TB-T0", "TB-T0")
    # It spoke to the portal (and the storage), never to the portal's PostgreSQL or Redis.
    database, broker = int(settings.DATABASES["default"]["PORT"] or 5432), urlsplit(settings.CELERY_BROKER_URL).port
    assert portal.port in seen and not seen & {database, broker or 6379}, seen
    records = TransferRecord.objects.filter(run=run)
    assert sorted(records.values_list("state", "bytes")) == [("ok", 4 * MB)] * 10
    assert set(RunFile.objects.filter(run=run).values_list("worker", flat=True)) == {"agent TB-T0/agent"}
    # Its heartbeats said what it is (every second here).
    agent = SiteAgent.objects.get(site__name="TB-T0")
    assert (agent.version, set(agent.kinds), agent.last_seen is not None) == (VERSION, set(KINDS), True)
    wait_for(lambda: Run.objects.get(pk=run.pk).copies == "deleted", 60, "the agent deleting the run's copies")
    assert not list(registry.site_dir("t1a").glob(f"**/portal-runs/{run.directory}/*"))


def test_an_agent_runs_an_iperf3_run_from_its_site(
    registry: Testbed, coordinator: Any, agent_of: Callable[[str], Path], tmp_path: Path
) -> None:
    agent_of("TB-T1-A")
    iperf3 = registry.endpoint("iperf3")  # TB-T0's iperf3 server
    host, port = iperf3.url.split("//")[1].split(":")
    run = run_start(
        user=coordinator,
        kind="network",
        site=Site.objects.get(name="TB-T1-A"),
        parameters={"host": host, "port": int(port), "duration": 2, "streams": 1},
    )
    wait_for_run_end(run, 90)

    assert run.state == "finished", f"{run.message}\n{logs(tmp_path)}"
    assert run.agent is not None and run.agent.site.name == "TB-T1-A"
    assert run.summary["rate"] > 0 and run.summary["path_mtu"]
    assert NetworkMeasurement.objects.filter(run=run).count() == 1


def test_the_portal_away_for_a_minute_while_the_agent_measures_loses_nothing_and_doubles_nothing(
    registry: Testbed,
    coordinator: Any,
    cleanup: list[Run],
    agent_of: Callable[[str], Path],
    portal: Portal,
) -> None:
    tmp_path = portal.directory
    spool = agent_of("TB-T0")
    run = transfer(coordinator, cleanup, registry, files=20, concurrency=4)
    wait_for(lambda: RunFile.objects.filter(run=run, state="running").exists(), 60, lambda: logs(tmp_path))
    portal.stop()
    # Measured while the portal is away: the copies it had in hand end and their results wait on disk.
    wait_for(lambda: len(list(spool.glob("job-*.json"))) >= 1, 60, lambda: f"a spooled result\n{logs(tmp_path)}")
    spooled = len(list(spool.glob("job-*.json")))
    time.sleep(OUTAGE)
    assert len(list(spool.glob("job-*.json"))) >= spooled  # nothing was delivered while the portal was away
    portal.start()

    try:
        wait_for_run_end(run, 180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{logs(tmp_path)}") from None
    assert run.state == "finished", f"{run.message}\n{logs(tmp_path)}"
    records = list(TransferRecord.objects.filter(run=run).values_list("origin_id", "state", "attempt"))
    assert len(records) == 20 and {(state, attempt) for _, state, attempt in records} == {("ok", 1)}
    assert len({origin for origin, _, _ in records}) == 20
    assert set(RunFile.objects.filter(run=run).values_list("state", "attempt")) == {("done", 1)}
    assert AgentJob.objects.filter(run=run, kind="transfer").count() == 20
    # The agent forgets a result once the portal acknowledged it (just after the portal stored the last one).
    wait_for(lambda: not list(spool.glob("job-*.json")), 15, lambda: f"an empty spool\n{logs(tmp_path)}")
    assert not list((spool / "rejected").iterdir())
