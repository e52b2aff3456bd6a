"""A private RabbitMQ with its STOMP plugin, on free ports, under a test's own directory: a test may stop and start
it without disturbing anything else (the system instance on 5672 has STOMP disabled and is left alone)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from common import processes

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


@dataclass
class PrivateRabbit:
    root: Path
    stomp_port: int = 0
    amqp_port: int = 0
    dist_port: int = 0

    def __post_init__(self) -> None:
        taken: set[int] = set()
        for name, preferred in (("stomp_port", 41613), ("amqp_port", 41672), ("dist_port", 41673)):
            port = processes.free_port(preferred, taken)
            taken.add(port)
            setattr(self, name, port)
        self.node = f"ingest{os.getpid()}@localhost"
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "enabled_plugins").write_text("[rabbitmq_stomp].\n")
        (self.root / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.amqp_port}\n"
            f"stomp.listeners.tcp.1 = 127.0.0.1:{self.stomp_port}\n"
            "loopback_users.guest = true\n"
        )

    @property
    def pidfile(self) -> Path:
        return self.root / "launcher.pid"

    def start(self, timeout: float = 90.0) -> None:
        env = {
            **os.environ,
            "HOME": str(self.root),  # the Erlang cookie is made here
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.root / "log"),
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_PID_FILE": str(self.root / "rabbitmq.pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq.conf"),
        }
        pid = processes.start([RABBITMQ_SERVER], pidfile=self.pidfile, logfile=self.root / "server.log", env=env)
        if not processes.wait_for_port(self.stomp_port, timeout=timeout, pid=pid):
            log = (self.root / "server.log").read_text()[-3000:]
            self.stop()
            raise RuntimeError(f"RabbitMQ did not open STOMP on {self.stomp_port}:\n{log}")

    def stop(self) -> None:
        processes.stop(self.pidfile, timeout=30)
        deadline = time.monotonic() + 30
        while not processes.port_free(self.stomp_port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def restart(self) -> None:
        self.stop()
        self.start()
