"""manage.py ingest --format fts|rucio|perfsonar FILE: replay a dump of messages (NDJSON, gzip too)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from ingest.parsers import FORMATS
from ingest.services import IngestResult, ingest_lines
from sites.models import Experiment


class Command(BaseCommand):
    help = "Replay a dump of FTS, Rucio or perfSONAR messages (one JSON per line; .gz too) into the records."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--batch", type=int, default=5000, help="messages per transaction (default 5000)")
        parser.add_argument(
            "--experiment", default=None, help="experiment of messages that name none (single-VO Rucio, perfSONAR)"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **options: Any) -> None:
        path: Path = options["file"]
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        default = None
        if options["experiment"]:
            found = Experiment.objects.filter(name__iexact=options["experiment"]).first()
            if found is None:
                raise CommandError(f"--experiment: {options['experiment']!r} is not an experiment of the registry")
            default = found.pk
        total = IngestResult()
        raw = path.open("rb")
        gzipped = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        stream: io.BufferedIOBase = gzip.GzipFile(fileobj=raw) if gzipped else raw
        # The bar follows the bytes read from the file (compressed ones for a .gz).
        with (
            raw,
            stream,
            tqdm(
                total=path.stat().st_size, unit="B", unit_scale=True, disable=options["no_progress"], desc=path.name
            ) as bar,
        ):
            position = 0
            for _count, result in ingest_lines(
                format=options["format"], lines=stream, batch_size=options["batch"], default_experiment=default
            ):
                total.add(result)
                bar.update(raw.tell() - position)
                position = raw.tell()
                bar.set_postfix(accepted=total.accepted, duplicates=total.duplicates, rejected=len(total.rejected))
        for entry in total.rejected[:20]:
            self.stderr.write(f"line {entry['index'] + 1} (non-blank): {entry['error']}")
        if len(total.rejected) > 20:
            self.stderr.write(f"... and {len(total.rejected) - 20} more rejected")
        self.stdout.write(
            f"accepted {total.accepted}, duplicates {total.duplicates}, skipped {total.skipped}, "
            f"rejected {len(total.rejected)}"
        )
