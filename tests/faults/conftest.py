"""The fault suite's deployments: a portal of its own (database on a private PostgreSQL, broker on a private Redis,
workers, beat and a web server as an operator starts them) against the testbed (bin/portal test gives it one of its
own, beside the main suite's), broken for real by the tests. Each test adds its tally to FAULTS, and the session
ends with one line: faults survived, files lost, records doubled."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from common import processes
from testbed.grid import Testbed
from tests.faults.servers import PostgresServer, RedisServer

ROOT = Path(settings.BASE_DIR)
TEMPLATE = "portal_faults_template"
# Where the suite's own Redis servers start looking for a free port: away from the ones the main suite's tests start
# theirs from (46379), since bin/portal test runs the two suites at the same time (a port found free by both before
# either binds it would give one of them the other's server).
REDIS_PORT = 44379


@dataclass
class Tally:
    fault: str
    survived: bool = False
    files_lost: int = 0
    records_doubled: int = 0


FAULTS: list[Tally] = []


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """This test's line of the summary: survived once the test has passed."""
    entry = Tally(request.node.name)
    FAULTS.append(entry)
    yield entry
    report = getattr(request.node, "rep_call", None)
    entry.survived = bool(report is not None and report.passed)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FAULTS:
        return
    survived = sum(entry.survived for entry in FAULTS)
    lost = sum(entry.files_lost for entry in FAULTS)
    doubled = sum(entry.records_doubled for entry in FAULTS)
    terminalreporter.write_line(
        f"fault suite: {survived} of {len(FAULTS)} faults survived, {lost} files lost, {doubled} records doubled"
    )


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of the suite's own, with a migrated template database that each deployment copies."""
    server = PostgresServer()
    server.start()
    try:
        server.execute(f'CREATE DATABASE "{TEMPLATE}"')
        env = {**_base_env(), "DATABASE_URL": server.url(TEMPLATE)}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300)
        yield server
    finally:
        server.remove()


def _base_env() -> dict[str, str]:
    import os

    env = {key: value for key, value in os.environ.items() if not key.startswith(("DATABASE_", "CELERY_"))}
    env.pop("REDIS_URL", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    return env


@dataclass
class Deployment:
    """One portal: its database on the private PostgreSQL, its broker on a private Redis, its processes."""

    name: str
    directory: Path
    postgres: PostgresServer
    redis: RedisServer
    database: str
    redis_db: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)
    pidfiles: list[Path] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        broker = f"redis://127.0.0.1:{self.redis.port}/{self.redis_db}"
        return {
            **_base_env(),
            "DATABASE_URL": self.postgres.url(self.database),
            "REDIS_URL": broker,
            "CELERY_BROKER_URL": broker,
            "CELERY_RESULT_BACKEND": broker,
            "PROBES_TESTBED": "true",
            "DISPATCH_HEARTBEAT": "1",
            "DISPATCH_WORKER_LOST_AFTER": "10",
            "LOG_LEVEL": "WARNING",
            **self.extra_env,
        }

    def driver(self, command: str, **arguments: Any) -> Any:
        result = subprocess.run(
            [sys.executable, "-m", "tests.faults.driver", command, json.dumps(arguments)],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if result.returncode != 0:
            raise AssertionError(f"driver {command} failed:\n{result.stderr[-3000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    def _start(self, name: str, argv: list[str]) -> Path:
        pidfile, logfile = self.directory / f"{name}.pid", self.directory / f"{name}.log"
        processes.start(argv, pidfile=pidfile, logfile=logfile, env=self.env, cwd=ROOT)
        self.pidfiles.append(pidfile)
        return pidfile

    def worker(self, name: str = "worker") -> Path:
        """A worker started the README's way: `celery -A portal worker -Q default --pool threads --concurrency 48`."""
        argv = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-Q", "default", "--pool", "threads"]
        pidfile = self._start(name, [*argv, "--concurrency", "48", "-l", "info"])
        wait_until(lambda: " ready." in self.log(name), 60, f"{self.name}'s {name} ready", self)
        return pidfile

    def beat(self, name: str = "beat") -> Path:
        schedule = self.directory / "celerybeat-schedule"
        return self._start(
            name, [sys.executable, "-m", "celery", "-A", "portal", "beat", "-l", "info", "-s", str(schedule)]
        )

    def web(self) -> int:
        port = processes.free_port(48000)
        argv = [sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "2"]
        pid = processes.read_pid(self._start("web", [*argv, "--timeout", "60"]))
        assert processes.wait_for_port(port, pid=pid, timeout=30), self.log("web")
        return port

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs_tail(self) -> str:
        return "\n".join(
            f"--- {path.stem}:\n{self.log(path.stem)[-2500:]}" for path in sorted(self.directory.glob("*.log"))
        )

    def stop(self) -> None:
        for pidfile in reversed(self.pidfiles):
            processes.stop(pidfile, timeout=10)


def wait_until(condition: Callable[[], Any], timeout: float, what: str, deployment: Deployment | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    logs = deployment.logs_tail() if deployment else ""
    raise AssertionError(f"not within {timeout} s: {what}\n{logs}")


@pytest.fixture
def deployments(postgres: PostgresServer, testbed: Testbed, tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    """Make deployments: each a fresh database copied from the migrated template, set up with the testbed's sites."""
    made: list[Deployment] = []
    servers: list[RedisServer] = []

    def make(name: str, *, redis: RedisServer | None = None, redis_db: int = 0, **extra_env: str) -> Deployment:
        database = f"faults_{name}_{len(made)}"
        postgres.execute(f'DROP DATABASE IF EXISTS "{database}"')
        postgres.execute(f'CREATE DATABASE "{database}" TEMPLATE "{TEMPLATE}"')
        if redis is None:
            redis = RedisServer(tmp_path / f"redis-{name}", port=REDIS_PORT)
            redis.start()
            servers.append(redis)
        deployment = Deployment(name, tmp_path / name, postgres, redis, database, redis_db, dict(extra_env))
        deployment.directory.mkdir(parents=True, exist_ok=True)
        deployment.driver("setup")
        made.append(deployment)
        return deployment

    yield make
    for deployment in made:
        deployment.stop()
    for server in servers:
        server.stop()
    for deployment in made:
        with contextlib.suppress(Exception):  # a test that failed with the server stopped: the session removes all
            postgres.execute(f'DROP DATABASE IF EXISTS "{deployment.database}" WITH (FORCE)')
