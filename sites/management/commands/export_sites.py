"""`manage.py export_sites`: the registry as a sites document, the shape `import_sites` takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sites.services import sites_export


class Command(BaseCommand):
    help = "Write the registry as a sites document (JSON or YAML) to standard output or a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=["json", "yaml"], default="json", help="default: json")
        parser.add_argument("--output", metavar="FILE", help="write here instead of standard output")

    def handle(self, *args: Any, **options: Any) -> None:
        document = sites_export()
        if options["format"] == "yaml":
            text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        else:
            text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if not options["output"]:
            self.stdout.write(text, ending="")
            return
        try:
            Path(options["output"]).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {options['output']}: {exc.strerror or exc}") from exc
        self.stdout.write(f"{len(document['sites'])} sites written to {options['output']}")
