"""manage.py consume --format fts-optimizer against a real RabbitMQ (STOMP plugin): decisions from the destination
that INGEST_STOMP_OPTIMIZER_DESTINATION names when no --destination is given, each stored once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
import stomp
from django.conf import settings
from django.db import connection

from results.models import OptimizerDecision

from .broker import PrivateRabbit

QUEUE = "/queue/fts-optimizer-test"


@pytest.fixture
def rabbit(tmp_path: Path) -> Iterator[PrivateRabbit]:
    broker = PrivateRabbit(tmp_path / "rabbitmq")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_the_consumer_stores_decisions_from_its_default_destination_once(
    world: dict[str, Any], rabbit: PrivateRabbit, tmp_path: Path
) -> None:
    decision = {
        "source_se": "davs://eosatlas.cern.ch",
        "dest_se": "srm://storm-fe.cr.cnaf.infn.it:8444",
        "datetime": "2024-05-14 10:02:00",
        "active": 60,
        "queue_size": 5000,
        "rationale": "Source throughput limitation reached",
    }
    producer = stomp.Connection([("127.0.0.1", rabbit.stomp_port)])
    producer.connect("guest", "guest", wait=True)
    for message in (decision, decision, {**decision, "datetime": "2024-05-14 10:03:00", "active": 58}):
        producer.send(QUEUE, orjson.dumps(message) + b"\x04", headers={"persistent": "true"})
    producer.disconnect()
    db = settings.DATABASES["default"]
    credentials = quote(db["USER"], safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else "")
    database = quote(connection.settings_dict["NAME"], safe="")
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{credentials}@{db['HOST']}:{db['PORT']}/{database}",
        "INGEST_STOMP_OPTIMIZER_DESTINATION": QUEUE,
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "consume", "--format", "fts-optimizer", "--port", str(rabbit.stomp_port),
         "--user", "guest", "--password", "guest", "--exit-after", "3", "--flush-seconds", "0.5"],
        cwd=settings.BASE_DIR, env=env, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 0, output
    assert "accepted 2, duplicates 1" in output, output
    assert list(OptimizerDecision.objects.order_by("at").values_list("active", flat=True)) == [60, 58]


def test_consume_without_a_destination_needs_one_for_records() -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--destination: required"):
        call_command("consume", "--format", "fts")
