"""`manage.py export_challenge SLUG`: a challenge as its plan document, the shape `load_challenge` takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from challenges.models import Challenge
from challenges.plan import plan_export


class Command(BaseCommand):
    help = "Write a challenge as a plan document (JSON or YAML) to standard output or a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", metavar="SLUG", help="the challenge's slug")
        parser.add_argument("--format", choices=["json", "yaml"], default="json", help="default: json")
        parser.add_argument("--output", metavar="FILE", help="write here instead of standard output")

    def handle(self, *args: Any, **options: Any) -> None:
        challenge = Challenge.objects.filter(slug=options["slug"]).first()
        if challenge is None:
            raise CommandError(f"no challenge with the slug {options['slug']!r}")
        document = plan_export(challenge=challenge)
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
        self.stdout.write(f"{challenge.slug}: {len(document['activities'])} activities written to {options['output']}")
