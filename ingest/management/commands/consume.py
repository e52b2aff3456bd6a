"""manage.py consume --format fts|rucio|fts-optimizer: subscribe to a STOMP destination and ingest continuously."""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.consumer import ConsumerConfig, StompConsumer
from sites.models import Experiment


class Command(BaseCommand):
    help = (
        "Subscribe to a STOMP topic or queue of FTS or Rucio messages (or FTS optimizer decisions) and store them, "
        "acknowledging each message only after its records are committed; reconnects after a broker restart."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=["fts", "rucio", "fts-optimizer"])
        parser.add_argument(
            "--destination",
            default="",
            help="e.g. /topic/transfer.fts_monitoring_complete or /queue/rucio; for fts-optimizer the default is "
            "INGEST_STOMP_OPTIMIZER_DESTINATION",
        )
        parser.add_argument("--host", default=settings.INGEST_STOMP_HOST)
        parser.add_argument("--port", type=int, default=settings.INGEST_STOMP_PORT)
        parser.add_argument("--user", default=settings.INGEST_STOMP_USER)
        parser.add_argument("--password", default=settings.INGEST_STOMP_PASSWORD)
        parser.add_argument("--vhost", default=settings.INGEST_STOMP_VHOST)
        parser.add_argument("--batch", type=int, default=500, help="messages per transaction")
        parser.add_argument("--flush-seconds", type=float, default=1.0, help="store a partial batch after this")
        parser.add_argument("--experiment", default=None, help="experiment of messages that name none (Rucio)")
        parser.add_argument(
            "--durable-name", default="", help="RabbitMQ: keep a /topic/ subscription while away, in this queue"
        )
        parser.add_argument("--exit-after", type=int, default=0, help="stop after this many messages (tests)")

    def handle(self, *args: Any, **options: Any) -> None:
        logging.getLogger("ingest").setLevel(logging.INFO)
        default = None
        if options["experiment"]:
            found = Experiment.objects.filter(name__iexact=options["experiment"]).first()
            if found is None:
                raise CommandError(f"--experiment: {options['experiment']!r} is not an experiment of the registry")
            default = found.pk
        destination = options["destination"]
        if not destination and options["format"] == "fts-optimizer":
            destination = settings.INGEST_STOMP_OPTIMIZER_DESTINATION
        if not destination:
            raise CommandError("--destination: required for the formats fts and rucio")
        consumer = StompConsumer(
            ConsumerConfig(
                host=options["host"],
                port=options["port"],
                destination=destination,
                format=options["format"],
                user=options["user"],
                password=options["password"],
                vhost=options["vhost"],
                batch=options["batch"],
                flush_seconds=options["flush_seconds"],
                default_experiment=default,
                durable_name=options["durable_name"],
            )
        )
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: consumer.stop())
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)  # `kill -USR1`: where is it?
        limit = options["exit_after"]
        stats = consumer.run(until=(lambda s: s.received >= limit) if limit else None)
        result = stats.result
        self.stdout.write(
            f"received {stats.received} messages over {stats.connections} connections: accepted {result.accepted}, "
            f"duplicates {result.duplicates}, skipped {result.skipped}, rejected {len(result.rejected)}"
        )
