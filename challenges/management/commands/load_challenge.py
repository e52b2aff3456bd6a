"""`manage.py load_challenge FILE`: upsert a challenge from its plan document, all or nothing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from challenges.documents import PlanDocumentError, plan_document_load
from challenges.plan import plan_import


class Command(BaseCommand):
    help = (
        "Import a plan document (JSON, or YAML when the name ends .yaml/.yml or the text is not JSON); "
        "FILE - reads standard input. The same slug again updates the challenge in place. Any problem is "
        "listed with its place and nothing is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="the plan document, or - for standard input")

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["file"]
        try:
            text = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {name}: {exc.strerror or exc}") from exc
        content_type = "application/yaml" if name.lower().endswith((".yaml", ".yml")) else None
        try:
            summary = plan_import(document=plan_document_load(text=text, content_type=content_type))
        except PlanDocumentError as exc:
            for error in exc.errors:
                self.stderr.write(f"{error['place']}: {error['error']}")
            count = len(exc.errors)
            raise CommandError(
                f"{count} problem{'s' if count != 1 else ''} in {'standard input' if name == '-' else name}; "
                "nothing was imported"
            ) from exc
        self.stdout.write(f"imported: {summary}")
