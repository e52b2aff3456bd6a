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
import psycopg
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


def start_consumer(broker: PrivateRabbit, log: Any, *, batch: int) -> subprocess.Popen[bytes]:
    """manage.py consume of the queue, on the test database, its output into log."""
    db = settings.DATABASES["default"]
    credentials = quote(db["USER"], safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else "")
    database = quote(connection.settings_dict["NAME"], safe="")
    env = {**os.environ, "DATABASE_URL": f"postgres://{credentials}@{db['HOST']}:{db['PORT']}/{database}"}
    return subprocess.Popen(
        [sys.executable, "manage.py", "consume", "--format", "fts", "--destination", QUEUE, "--port",
         str(broker.stomp_port), "--user", "guest", "--password", "guest", "--batch", str(batch),
         "--flush-seconds", "0.5"],
        cwd=settings.BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def stop_consumer(consumer: subprocess.Popen[bytes], log: Any, path: Path) -> str:
    """SIGTERM, and the consumer's output; a consumer that does not stop within 30 s fails the test."""
    consumer.terminate()
    try:
        consumer.wait(timeout=30)
    except subprocess.TimeoutExpired:
        consumer.send_signal(signal.SIGUSR1)  # its threads' stacks into the log
        time.sleep(1)
        consumer.kill()
        consumer.wait()
        log.close()
        raise AssertionError(f"the consumer did not stop within 30 s of SIGTERM:\n{path.read_text()[-4000:]}") from None
    log.close()
    return path.read_text()


def assert_queue_empty(broker: PrivateRabbit) -> None:
    """Everything was acknowledged: a new subscriber of the queue gets nothing."""
    leftovers = Collect()
    probe = stomp.Connection([("127.0.0.1", broker.stomp_port)])
    probe.set_listener("collect", leftovers)
    probe.connect("guest", "guest", wait=True)
    probe.subscribe(QUEUE, id="probe", ack="client-individual")
    time.sleep(2)
    probe.disconnect()
    assert leftovers.frames == []


def allow_connections(database: str, allowed: bool) -> None:
    """As while PostgreSQL restarts: new connections to the database refused (or allowed again). From another
    database, as PostgreSQL refuses it from a connection to this one."""
    db = settings.DATABASES["default"]
    with psycopg.connect(
        host=db["HOST"], port=db["PORT"], user=db["USER"], password=db.get("PASSWORD") or None, dbname="postgres",
        autocommit=True,
    ) as admin:  # fmt: skip
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {"true" if allowed else "false"}')


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_consumer_survives_the_database_going_away_without_losing_or_doubling_a_message(
    world: dict[str, Any], rabbit: PrivateRabbit, tmp_path: Path
) -> None:
    """PostgreSQL restarting, as the consumer sees it: its connection terminated and new ones refused for a while.
    The batches that fail are not acknowledged; the consumer waits, and stores them once the database is back.
    Most messages are published while the database is away, so that some surely arrive then (the consumer can store
    all 300 before a cut the test makes after the first batches)."""
    publish(rabbit, [fts_variant(i) for i in range(40)])
    path = tmp_path / "consumer.log"
    log = path.open("wb")
    consumer = start_consumer(rabbit, log, batch=20)
    database = connection.settings_dict["NAME"]
    try:
        wait_until(lambda: count() >= 20, 60, "the first batches")
        try:
            allow_connections(database, False)
            with connection.cursor() as cursor:
                # Waiting (up to 10 s) for each backend to end: a commit under way when it is told to end can still
                # complete, and must do so before the count below is taken.
                cursor.execute(
                    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            down_at = count()
            publish(rabbit, [fts_variant(i) for i in range(40, 300)])
            time.sleep(4)
            assert count() == down_at <= 40
            assert consumer.poll() is None, path.read_text()
        finally:
            allow_connections(database, True)
        wait_until(lambda: count() >= 300, 120, "every message after the database came back")
        time.sleep(2)  # anything redelivered meanwhile is stored as a duplicate, not a record
    finally:
        text = stop_consumer(consumer, log, path)
    assert consumer.returncode == 0, text
    assert "database error" in text, text
    assert count() == 300
    assert sum(RateRollup.objects.values_list("files_ok", flat=True)) == 300
    assert_queue_empty(rabbit)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_consumer_survives_a_broker_restart_without_losing_or_doubling_a_message(
    world: dict[str, Any], rabbit: PrivateRabbit, tmp_path: Path
) -> None:
    # Enough before the restart that the consumer is still at them when it comes (it stores hundreds a second).
    first, second = [fts_variant(i) for i in range(1000)], [fts_variant(i) for i in range(1000, 1300)]
    publish(rabbit, first)
    path = tmp_path / "consumer.log"
    log = path.open("wb")
    consumer = start_consumer(rabbit, log, batch=40)
    try:
        wait_until(lambda: count() >= 40, 60, "the first batches")
        assert count() < 1000  # the broker goes down with messages still queued or unacknowledged
        rabbit.restart()
        publish(rabbit, second)
        wait_until(lambda: count() >= 1300, 120, "every message after the restart")
        time.sleep(2)  # anything redelivered meanwhile is stored as a duplicate, not a record
    finally:
        text = stop_consumer(consumer, log, path)
    assert consumer.returncode == 0, text
    assert count() == 1300
    assert sum(RateRollup.objects.values_list("files_ok", flat=True)) == 1300
    assert "reconnecting" in text, text
    assert "over 2 connections" in text, text
    assert_queue_empty(rabbit)


def test_the_consumers_header_parser_gives_the_headers_stomp_py_gives() -> None:
    """ingest.consumer replaces stomp.py's header parser (the same result at a third of its cost): the two agree on a
    real MESSAGE frame's headers, on STOMP's escapes, on a repeated header (the first wins), on a line without a
    colon or without a name, and on an unknown escape (kept)."""
    import stomp.utils

    from ingest.consumer import STOMP_HEADERS_PARSE, stomp_headers_parse

    assert stomp.utils.parse_headers is stomp_headers_parse  # what stomp.utils.parse_frame calls
    frames = [
        ["MESSAGE", "subscription:ingest", "destination:/queue/fts", "message-id:T_ingest@@session-x@@1",
         "redelivered:false", "ack:T_1", "persistent:true", "content-length:2210"],
        ["MESSAGE", "a\\cb:c\\\\d\\ne\\rf", "plain:x:y", "plain:second", "no colon here", ":no name", "odd:\\t\\"],
        ["MESSAGE", "", "empty:"],
    ]  # fmt: skip
    for lines in frames:
        assert stomp_headers_parse(lines, 1) == STOMP_HEADERS_PARSE(lines, 1)
    assert stomp_headers_parse(frames[1], 1)["a:b"] == "c\\d\ne\rf"
    frame = stomp.utils.parse_frame(b"MESSAGE\nack:T_7\nx:a\\cb\n\n{}")
    assert frame is not None and frame.headers == {"ack": "T_7", "x": "a:b"} and frame.body == b"{}"
