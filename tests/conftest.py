"""Fixtures shared by the whole suite: the real testbed, gfal2 clients for it, and a real Celery worker."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from common import processes
from testbed.certs import ensure_pki
from testbed.client import gfal2_context
from testbed.grid import Testbed, TestbedConfig
from tests.workers import worker_argv, worker_database_url


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """The running testbed; what the session had to start is stopped after it."""
    bed = Testbed(TestbedConfig.from_settings())
    started = bed.up()
    yield bed
    if started:
        bed.down(only=started)


# The testbed that requires tokens runs beside the ordinary one: its own directory and ports (this far above
# TESTBED_BASE_PORT; the ordinary one takes 17 ports from it), the same CA (one X509_CERT_DIR for every gfal2 context
# of the session).
TOKEN_TESTBED_PORT_OFFSET = 50


def token_testbed_config() -> TestbedConfig:
    config = TestbedConfig.from_settings()
    config.directory = config.directory.with_name(config.directory.name + "-tokens")
    config.base_port += TOKEN_TESTBED_PORT_OFFSET
    config.tokens = "required"
    return config


@pytest.fixture(scope="session")
def token_testbed() -> Iterator[Testbed]:
    """A second testbed that requires WLCG tokens of its own issuer, started only when a test asks for it (and
    stopped after the session when it started it)."""
    ordinary = Testbed(TestbedConfig.from_settings())
    ensure_pki(ordinary.pki.root)
    bed = Testbed(token_testbed_config())
    if not bed.pki.host_cert.exists():
        shutil.copytree(ordinary.pki.root, bed.pki.root, dirs_exist_ok=True)
    started = bed.up()
    os.environ["X509_CERT_DIR"] = str(bed.pki.cert_dir)
    yield bed
    if started:
        bed.down(only=started)


@pytest.fixture
def gfal(testbed: Testbed) -> Any:
    """A fresh gfal2 context pointed at the testbed."""
    return gfal2_context(testbed)


@pytest.fixture
def celery_worker_process(django_db_setup: None, tmp_path: Path) -> Iterator[str]:
    """A real Celery worker (its own process, the real Redis broker) on a private queue; yields the queue name.

    The worker uses the test database, so its tasks see what a transactional test committed.
    """
    queue = f"test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": worker_database_url()}
    pidfile = tmp_path / "worker.pid"
    argv = worker_argv(name=queue, queues=queue, pool="solo", concurrency=1)
    processes.start(argv, pidfile=pidfile, logfile=tmp_path / "worker.log", env=env, cwd=settings.BASE_DIR)
    try:
        yield queue
    finally:
        processes.stop(pidfile)


@pytest.fixture(scope="session", autouse=True)
def broker_epoch() -> None:
    """The broker's epoch key set before any test: a reaper in a test then re-sends at once only when the test made
    its broker lose its data, not because it was the session's first look."""
    from runs.dispatch import broker_lost_messages

    broker_lost_messages()


def pytest_configure(config: pytest.Config) -> None:
    # Persistent connections of the live server's thread would keep the test database busy at teardown.
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


@pytest.fixture(autouse=True)
def throttle_history_of_this_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The API's rate limits keep their history in the shared cache, per user or address: tests run one after the
    other from one address, so each test starts a history of its own (the limits themselves stay in force)."""
    from django.core.cache.backends.locmem import LocMemCache
    from rest_framework.throttling import SimpleRateThrottle

    monkeypatch.setattr(SimpleRateThrottle, "cache", LocMemCache(f"throttle-{uuid.uuid4()}", {}))


@pytest.fixture
def tasks_run_here() -> Iterator[None]:
    """Celery tasks run in this process as they are sent: the code a worker runs, against the test database."""
    from portal.celery import app

    before = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager = app.conf.task_eager_propagates = True
    yield
    app.conf.task_always_eager, app.conf.task_eager_propagates = before
