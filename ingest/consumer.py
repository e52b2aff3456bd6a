"""A STOMP consumer of FTS or Rucio messages (the way both publish: ActiveMQ / RabbitMQ topics and queues).

Messages are taken with client acknowledgements and acknowledged only after the batch that holds them is committed
(one cumulative ACK of the batch's last message: a batch is the deliveries of one connection in their order), so a
crash or a broker restart loses nothing: unacknowledged messages are delivered again, and the records' unique ids
make a second delivery a duplicate. After a lost connection it reconnects (with a growing
pause) and subscribes again; messages received on the old connection and not yet stored are dropped, because the
broker redelivers them. A database error (PostgreSQL restarting, a dropped connection) is handled the same way:
the batch is not acknowledged, and after a growing pause the consumer reconnects to the broker, which delivers
the batch again.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import stomp
import stomp.exception
import stomp.utils
from django.core.cache import cache
from django.db import DatabaseError, close_old_connections
from django.db import connection as db_connection

from .messages import fts_message_decode
from .services import IngestResult, InvalidItem, ingest_items

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 15.0  # seconds for the broker to answer CONNECT
DATABASE_PAUSE, DATABASE_PAUSE_MAX = 0.5, 30.0  # seconds to wait after a database error, doubled up to the max


@dataclass
class ConsumerConfig:
    host: str
    port: int
    destination: str
    format: str
    user: str = ""
    password: str = ""
    vhost: str = "/"
    batch: int = 500
    flush_seconds: float = 1.0
    default_experiment: int | None = None
    # RabbitMQ: a durable subscription of a /topic/ keeps messages published while the consumer is away.
    durable_name: str = ""


@dataclass
class ConsumerStats:
    received: int = 0
    batches: int = 0
    connections: int = 0
    result: IngestResult = field(default_factory=IngestResult)


@dataclass
class _Delivery:
    ack_id: str
    body: bytes
    generation: int
    received_at: float = field(default_factory=time.time)


STATUS_KEY = "ingest:consumer:{format}"
STATUS_EVERY = 5.0  # seconds between two status writes of an idle consumer
STATUS_FRESH = 60.0  # a status older than this: no consumer runs


def consumer_status_write(*, format: str, destination: str, lag_seconds: float, waiting: int) -> None:
    """The consumer's word to the now board (in the cache): how long the oldest message it stored last had waited
    since it arrived, and how many are waiting. Never fails the consumer: the cache only informs."""
    try:
        cache.set(
            STATUS_KEY.format(format=format),
            {"at": time.time(), "destination": destination, "lag_seconds": lag_seconds, "waiting": waiting},
            timeout=int(STATUS_FRESH * 10),
        )
    except Exception as exc:  # Redis away a moment: the next status tells
        log.debug("consumer status not written: %s", exc)


def consumer_lag(*, format: str) -> float | None:
    """Seconds the messages of the consumer of `format` wait before they are stored; None when none runs (no
    status in the last minute)."""
    try:
        status = cache.get(STATUS_KEY.format(format=format))
    except Exception:
        return None
    if not status or time.time() - float(status.get("at", 0)) > STATUS_FRESH:
        return None
    return float(status.get("lag_seconds", 0.0))


# stomp.py (9.0) parses every frame's headers with two re.sub each (STOMP's escapes: \r \n \c \\), a fifth of its
# CPU for a message: 7 of 25 us of CPU per FTS message received (bench/README.md, issue #37). This parser gives the
# same headers (stomp.py's own unescaping, only where a backslash is) and replaces stomp.py's in this process;
# tests/ingest/test_consume.py checks the two agree on plain and escaped headers.
STOMP_HEADERS_PARSE = stomp.utils.parse_headers
_ESCAPE = re.compile(r"\\.")


def stomp_headers_parse(lines: list[str], offset: int = 0) -> dict[str, str]:
    """stomp.utils.parse_headers: the first value of each header, its escapes undone."""
    headers: dict[str, str] = {}
    for line in lines[offset:]:
        key, colon, value = line.partition(":")
        if not colon or not key:
            continue
        if "\\" in key:
            key = _ESCAPE.sub(stomp.utils._unescape_header, key)
        if key not in headers:
            headers[key] = _ESCAPE.sub(stomp.utils._unescape_header, value) if "\\" in value else value
    return headers


stomp.utils.parse_headers = stomp_headers_parse  # read by stomp.utils.parse_frame at every frame


class _Listener(stomp.ConnectionListener):
    def __init__(self, deliveries: queue.SimpleQueue[_Delivery], generation: int) -> None:
        self.deliveries = deliveries
        self.generation = generation
        self.lost = threading.Event()

    def on_message(self, frame: Any) -> None:
        headers = frame.headers
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body).encode()
        self.deliveries.put(_Delivery(headers.get("ack") or headers["message-id"], body, self.generation))

    def on_disconnected(self) -> None:
        self.lost.set()

    def on_heartbeat_timeout(self) -> None:
        self.lost.set()


def message_items(body: bytes, *, format: str = "") -> list[Any]:
    """The items of one STOMP message: one JSON object (FTS ends it with an EOT, \\x04) or an array of them. FTS
    messages are decoded into the fields the parser reads (ingest.messages)."""
    text = body.strip().rstrip(b"\x04").strip()
    if format == "fts" and text[:1] == b"{" and (message := fts_message_decode(text)) is not None:
        return [message]
    try:
        loaded = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return [InvalidItem(f"not JSON: {exc}")]
    return loaded if isinstance(loaded, list) else [loaded]


class StompConsumer:
    """Subscribe, store in batches, acknowledge after commit; reconnect after a lost connection."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.stats = ConsumerStats()
        self.stopping = threading.Event()
        # SimpleQueue: a put and a get cost a tenth of queue.Queue's, paid for every message.
        self._deliveries: queue.SimpleQueue[_Delivery] = queue.SimpleQueue()
        self._generation = 0
        self._database_pause = DATABASE_PAUSE

    def stop(self) -> None:
        self.stopping.set()

    def _connect(self) -> tuple[stomp.Connection, _Listener]:
        config = self.config
        self._generation += 1
        # auto_decode=False: bodies stay bytes, as the decoders read them (not decoded to text and encoded again).
        connection = stomp.Connection(
            [(config.host, config.port)], heartbeats=(4000, 4000), vhost=config.vhost, auto_decode=False
        )
        listener = _Listener(self._deliveries, self._generation)
        connection.set_listener("ingest", listener)
        # Not connect(wait=True): stomp.py then waits without a time limit, and a broker that accepts the socket
        # while it restarts but never answers CONNECT would hold the consumer (and a SIGTERM) forever.
        connection.connect(config.user or None, config.password or None, wait=False)
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while not connection.is_connected():
            if self.stopping.is_set() or listener.lost.is_set() or time.monotonic() > deadline:
                with contextlib.suppress(Exception):
                    connection.disconnect()
                raise stomp.exception.ConnectFailedException(
                    f"no CONNECTED from the broker within {CONNECT_TIMEOUT:.0f} s"
                )
            time.sleep(0.05)
        headers = {"prefetch-count": str(config.batch * 2)}
        if config.durable_name:
            headers.update({"durable": "true", "auto-delete": "false", "x-queue-name": config.durable_name})
        # "client": an ACK acknowledges the message it names and every one delivered before it on this subscription,
        # so a batch (the deliveries of this connection, in their order, after the batch before it) is acknowledged
        # by one ACK of its last message, not one frame per message (which cost the consumer more than parsing did).
        connection.subscribe(destination=config.destination, id="ingest", ack="client", headers=headers)
        self.stats.connections += 1
        log.info("subscribed to %s on %s:%s", config.destination, config.host, config.port)
        return connection, listener

    def run(self, *, until: Callable[[ConsumerStats], bool] | None = None) -> ConsumerStats:
        """Consume until stop() (or until(stats) is true after a batch)."""
        pause = 0.5
        while not self.stopping.is_set():
            try:
                connection, listener = self._connect()
            except (stomp.exception.ConnectFailedException, OSError) as exc:
                log.warning(
                    "broker %s:%s not reachable (%s); retrying in %.1f s",
                    self.config.host,
                    self.config.port,
                    exc,
                    pause,
                )
                self.stopping.wait(pause)
                pause = min(pause * 2, 10.0)
                continue
            pause = 0.5
            try:
                self._consume(connection, listener, until)
            except (stomp.exception.StompException, OSError) as exc:
                log.warning("connection to the broker lost (%r); reconnecting", exc)
            finally:
                with contextlib.suppress(Exception):  # the connection may be gone already
                    connection.disconnect()
            if until is not None and until(self.stats):
                break
        return self.stats

    def _consume(
        self, connection: stomp.Connection, listener: _Listener, until: Callable[[ConsumerStats], bool] | None
    ) -> None:
        generation = listener.generation
        status_at = 0.0
        while not self.stopping.is_set():
            batch = self._take(generation, listener)
            if batch or time.monotonic() - status_at > STATUS_EVERY:
                lag = time.time() - min(delivery.received_at for delivery in batch) if batch else 0.0
                consumer_status_write(
                    format=self.config.format,
                    destination=self.config.destination,
                    lag_seconds=lag,
                    waiting=self._deliveries.qsize(),
                )
                status_at = time.monotonic()
            if batch:
                try:
                    self._store(connection, batch)
                except DatabaseError as exc:
                    self._database_failed(exc)
                    return  # a new broker connection, on which the broker delivers the batch again
                self._database_pause = DATABASE_PAUSE
                if until is not None and until(self.stats):
                    return
            if listener.lost.is_set() or not connection.is_connected():
                log.warning("connection to the broker lost; reconnecting")
                return
            if not batch and until is not None and until(self.stats):
                return

    def _take(self, generation: int, listener: _Listener) -> list[_Delivery]:
        batch: list[_Delivery] = []
        deadline = time.monotonic() + self.config.flush_seconds
        while len(batch) < self.config.batch and not listener.lost.is_set():
            try:
                delivery = self._deliveries.get(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    break
                continue
            if delivery.generation == generation:  # older ones are redelivered on this connection
                batch.append(delivery)
            while len(batch) < self.config.batch:  # what has arrived meanwhile, without waiting
                try:
                    delivery = self._deliveries.get_nowait()
                except queue.Empty:
                    break
                if delivery.generation == generation:
                    batch.append(delivery)
        return batch

    def _database_failed(self, exc: DatabaseError) -> None:
        """After a database error nothing of the batch is committed, and it is not acknowledged: the broker delivers
        it again once this connection to it is closed. The database connection is closed (it may be broken: the
        next batch opens a new one), and the consumer waits, longer each time, for PostgreSQL to come back, rather
        than dying or taking the next batch only to fail again."""
        log.warning(
            "database error (%s); the batch is not acknowledged, retrying in %.1f s",
            str(exc).strip() or repr(exc),
            self._database_pause,
        )
        with contextlib.suppress(DatabaseError):
            db_connection.close()
        self.stopping.wait(self._database_pause)
        self._database_pause = min(self._database_pause * 2, DATABASE_PAUSE_MAX)

    def _store(self, connection: stomp.Connection, batch: list[_Delivery]) -> None:
        items: list[Any] = []
        for delivery in batch:
            items.extend(message_items(delivery.body, format=self.config.format))
        close_old_connections()
        result = ingest_items(
            format=self.config.format,
            items=items,
            user=None,
            default_experiment=self.config.default_experiment,
        )  # committed when it returns
        for entry in result.rejected:
            log.warning("rejected message: %s", entry["error"])
        self.stats.received += len(batch)
        try:  # the whole batch, bad messages too: they would be rejected again
            connection.ack(batch[-1].ack_id, "ingest")
        except stomp.exception.NotConnectedException:
            # Stored but not acknowledged: the broker delivers them again and they are counted as duplicates.
            log.warning("connection lost before the acknowledgements; the broker will redeliver")
        self.stats.batches += 1
        self.stats.result.add(result)
