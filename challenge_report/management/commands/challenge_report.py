"""manage.py challenge_report SLUG --format json|html|pdf|md --output FILE: the report of a challenge as it is now,
with everything in it (no reader to restrict it), written to FILE (or to stdout for json, html and md's zip is
binary: give --output)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from challenges.models import Challenge

from ...render import FORMATS
from ...selectors import report_now


class Command(BaseCommand):
    help = "Write the challenge report (json, html, pdf or md: a zip of report.md and its figures) to a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--format", choices=FORMATS, default="pdf")
        parser.add_argument("--output", help="the file to write; '-' for stdout (json and html only)", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        challenge = Challenge.objects.filter(slug=options["slug"]).first()
        if challenge is None:
            raise CommandError(f"no challenge {options['slug']!r}")
        format = options["format"]
        output = options["output"] or f"{challenge.slug}-report.{'zip' if format == 'md' else format}"
        if output == "-" and format in ("pdf", "md"):
            raise CommandError(f"a {format} report is binary: give --output FILE")
        began = time.monotonic()
        report = report_now(challenge=challenge, user=None, format=format)
        if output == "-":
            sys.stdout.write(report.body.decode("utf-8"))
            return
        Path(output).write_bytes(report.body)
        seconds = time.monotonic() - began
        self.stderr.write(f"wrote {output}: {len(report.body)} bytes, {format}, in {seconds:.1f} s")
