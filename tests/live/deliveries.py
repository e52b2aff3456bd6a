"""What the delivery tests share: a webhook receiver on 127.0.0.1 (http.server in a thread) that answers the
statuses it is told, and alerts and subscriptions made in a few words."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from live.models import Alert, AlertSubscription
from tests.challenges.factories import ChallengeFactory

STARTED = datetime(2024, 2, 12, 10, 0, tzinfo=UTC)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A webhook's server: answers `answers` in turn, then `default`; keeps every request it got."""

    url: str
    answers: list[int] = field(default_factory=list)
    default: int = 200
    delay: float = 0.0
    location: str = "http://elsewhere.example.org/"
    received: list[Received] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def do_POST(self) -> None:
        receiver: Receiver = self.server.receiver
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        time.sleep(receiver.delay)
        status = receiver.answers.pop(0) if receiver.answers else receiver.default
        answer = f"answered {status}".encode()
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("Location", receiver.location)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@contextmanager
def receiver_running() -> Iterator[Receiver]:
    """A receiver listening on a free port of 127.0.0.1 until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}/hooks/alerts?team=ops")  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.receiver  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def alert_make(**fields: Any) -> Alert:
    """An open alert (a throughput drop of a new challenge unless told otherwise)."""
    values: dict[str, Any] = {
        "kind": "throughput_drop",
        "subject": "link:1-2",
        "message": "throughput fell to 200 MB/s, a fifth of the last hour's",
        "value": 2e8,
        "threshold": 5e8,
        "started_at": STARTED,
        "last_seen_at": STARTED,
        **fields,
    }
    if "challenge" not in values:
        values["challenge"] = ChallengeFactory()
    return Alert.objects.create(**values)


def subscription_make(
    *, experiments: list[Any] | None = None, sites: list[Any] | None = None, **fields: Any
) -> AlertSubscription:
    """A subscription (a webhook at example.org unless told otherwise), made without the API's checks."""
    values = {"name": "ops", **fields}
    if not values.get("email"):
        values.setdefault("url", "http://hooks.example.org/alerts")
    subscription = AlertSubscription.objects.create(**values)
    subscription.experiments.set(experiments or [])
    subscription.sites.set(sites or [])
    return subscription
