"""`manage.py load_challenge FILE`: upsert a challenge from its plan document, all or nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from challenges.documents import PlanDocumentError, plan_document_load
from challenges.plan import plan_import
from common.documents import document_errors_report, document_file_read


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
            text, content_type = document_file_read(name)
        except OSError as exc:
            raise CommandError(f"cannot read {name}: {exc.strerror or exc}") from exc
        try:
            summary = plan_import(document=plan_document_load(text=text, content_type=content_type))
        except PlanDocumentError as exc:
            raise CommandError(document_errors_report(errors=exc.errors, name=name, write=self.stderr.write)) from exc
        self.stdout.write(f"imported: {summary}")
