"""`manage.py import_sites FILE`: upsert the sites document, all or nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from common.documents import document_errors_report, document_file_read
from sites.documents import SitesDocumentError, sites_document_load
from sites.services import sites_import


class Command(BaseCommand):
    help = (
        "Import a sites document (JSON, or YAML when the name ends .yaml/.yml or the text is not JSON); "
        "FILE - reads standard input. Any problem is listed with its place and nothing is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="the sites document, or - for standard input")

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["file"]
        try:
            text, content_type = document_file_read(name)
        except OSError as exc:
            raise CommandError(f"cannot read {name}: {exc.strerror or exc}") from exc
        try:
            summary = sites_import(document=sites_document_load(text=text, content_type=content_type))
        except SitesDocumentError as exc:
            raise CommandError(document_errors_report(errors=exc.errors, name=name, write=self.stderr.write)) from exc
        self.stdout.write(f"imported: {summary}")
