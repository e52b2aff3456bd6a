"""manage.py consume against a real RabbitMQ (STOMP plugin): acknowledgements after commit, and a broker restart
in the middle loses and doubles nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
import stomp
from django.conf import settings
from django.db import connection

from results.models import RateRollup, TransferRecord

from .broker import PrivateRabbit
from .samples import fts_variant

QUEUE = "/queue/fts-monitoring-complete"


@pytest.fixture
def rabbit(tmp_path: Path) -> Iterator[PrivateRabbit]:
    broker = PrivateRabbit(tmp_path / "rabbitmq")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def publish(broker: PrivateRabbit, messages: list[dict[str, Any]]) -> None:
    """As FTS publishes: one JSON message per STOMP message, ended by an EOT character; persistent."""
    producer = stomp.Connection([("127.0.0.1", broker.stomp_port)])
    producer.connect("guest", "guest", wait=True)
    for message in messages:
        producer.send(QUEUE, orjson.dumps(message) + b"\x04", headers={"persistent": "true"})
    producer.disconnect()


class Collect(stomp.ConnectionListener):
    def __init__(self) -> None:
        self.frames: list[Any] = []

    def on_message(self, frame: Any) -> None:
        self.frames.append(frame)


def count() -> int:
    return TransferRecord.objects.count()


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.django_db(transaction=True)
def test_the_consumer_survives_a_broker_restart_without_losing_or_doubling_a_message(
    world: dict[str, Any], rabbit: PrivateRabbit, tmp_path: Path
) -> None:
    first, second = [fts_variant(i) for i in range(300)], [fts_variant(i) for i in range(300, 600)]
    publish(rabbit, first)
    db = settings.DATABASES["default"]
    credentials = quote(db["USER"], safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else "")
    database = quote(connection.settings_dict["NAME"], safe="")
    env = {**os.environ, "DATABASE_URL": f"postgres://{credentials}@{db['HOST']}:{db['PORT']}/{database}"}
    log = (tmp_path / "consumer.log").open("wb")
    consumer = subprocess.Popen(
        [sys.executable, "manage.py", "consume", "--format", "fts", "--destination", QUEUE, "--port",
         str(rabbit.stomp_port), "--user", "guest", "--password", "guest", "--batch", "40", "--flush-seconds", "0.5"],
        cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_until(lambda: count() >= 40, 60, "the first batches")
        assert count() < 300  # the broker goes down with messages still queued or unacknowledged
        rabbit.restart()
        publish(rabbit, second)
        wait_until(lambda: count() >= 600, 120, "every message after the restart")
        time.sleep(2)  # anything redelivered meanwhile is stored as a duplicate, not a record
    finally:
        consumer.terminate()
        try:
            consumer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            consumer.send_signal(signal.SIGUSR1)  # its threads' stacks into the log
            time.sleep(1)
            consumer.kill()
            consumer.wait()
            log.close()
            text = (tmp_path / "consumer.log").read_text()
            raise AssertionError(f"the consumer did not stop within 30 s of SIGTERM:\n{text[-4000:]}") from None
        log.close()
    text = (tmp_path / "consumer.log").read_text()
    assert consumer.returncode == 0, text
    assert count() == 600
    assert sum(RateRollup.objects.values_list("files_ok", flat=True)) == 600
    assert "reconnecting" in text, text
    assert "over 2 connections" in text, text
    # Everything was acknowledged: a new subscriber of the queue gets nothing.
    leftovers = Collect()
    probe = stomp.Connection([("127.0.0.1", rabbit.stomp_port)])
    probe.set_listener("collect", leftovers)
    probe.connect("guest", "guest", wait=True)
    probe.subscribe(QUEUE, id="probe", ack="client-individual")
    time.sleep(2)
    probe.disconnect()
    assert leftovers.frames == []
