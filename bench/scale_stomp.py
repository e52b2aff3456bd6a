"""bench/scale's STOMP consumer rate: FTS messages published to a private RabbitMQ (tests/ingest/broker.py), one
JSON message per STOMP message as FTS publishes them, then `manage.py consume` (batches of 5,000) storing them into
the bench's database; the clock runs from its first stored record to its last (its start-up is left out)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

QUEUE = "/queue/fts-monitoring-complete"
BATCH = 5000


def _count(cutoff: str) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute('SELECT count(*) FROM results_transferrecord WHERE "end" < %s', [cutoff])
        return int(cursor.fetchone()[0])


def _publish(port: int, bodies: list[bytes]) -> None:
    import stomp

    producer = stomp.Connection([("127.0.0.1", port)])
    producer.connect("guest", "guest", wait=True)
    for body in bodies:
        producer.send(QUEUE, body + b"\x04", headers={"persistent": "true"})
    producer.disconnect()


def _rabbit(root: Path) -> Any:
    """tests/ingest's private RabbitMQ on ports of its own (47613...): the tests' brokers, started by other
    worktrees at the same time, take 41613... and a consumer must never meet another's broker."""
    from common import processes
    from tests.ingest.broker import PrivateRabbit

    rabbit = PrivateRabbit(root)
    taken: set[int] = set()
    for name, preferred in (("stomp_port", 47613), ("amqp_port", 47672), ("dist_port", 47673)):
        port = processes.free_port(preferred, taken)
        taken.add(port)
        setattr(rabbit, name, port)
    rabbit.node = f"benchscale{os.getpid()}@localhost"
    (root / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = 127.0.0.1:{rabbit.amqp_port}\n"
        f"stomp.listeners.tcp.1 = 127.0.0.1:{rabbit.stomp_port}\n"
        "loopback_users.guest = true\n"
    )
    return rabbit


def stomp_rate(*, database_url: str, messages: int, cutoff: str, root: Path) -> tuple[float, int]:
    """Messages a second the consumer stored, and how many it stored, within 10 minutes."""
    import orjson
    from scale_ingest import bench_ingest

    bench = bench_ingest()
    bench.registry_setup()
    bench.plan_setup(4)
    rabbit = _rabbit(root / "var" / "bench-scale-rabbitmq")
    rabbit.start()
    log = (root / "var" / "bench-scale-consume.log").open("wb")
    consumer = None
    try:
        _publish(rabbit.stomp_port, [orjson.dumps(bench.message(i)) for i in range(messages)])
        before = _count(cutoff)
        argv = [sys.executable, "manage.py", "consume", "--format", "fts", "--destination", QUEUE]
        argv += ["--port", str(rabbit.stomp_port), "--user", "guest", "--password", "guest"]
        argv += ["--batch", str(BATCH), "--flush-seconds", "0.5"]
        env = {**os.environ, "DATABASE_URL": database_url, "LOG_LEVEL": "WARNING"}
        consumer = subprocess.Popen(argv, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
        first = None
        deadline = time.monotonic() + 600
        stored = 0
        while time.monotonic() < deadline and stored < messages:
            time.sleep(0.2)
            stored = _count(cutoff) - before
            if stored and first is None:
                first = (time.monotonic(), stored)
        last = time.monotonic()
        if first is None or stored <= first[1]:
            return 0.0, stored
        return (stored - first[1]) / (last - first[0]), stored
    finally:
        if consumer is not None:
            consumer.terminate()
            consumer.wait(timeout=60)
        log.close()
        rabbit.stop()
