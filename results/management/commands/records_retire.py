"""Retire the raw transfer records of whole months whose rollups are final (results.store.retention)."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from results.store.retention import RetireRefused, months_to_retire, records_retire


class Command(BaseCommand):
    help = (
        "Detach and drop the monthly partitions of raw transfer records that end on or before --before, when their "
        "rollups are final; all of them or none. Rates, minute matrices and the now board keep working."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--before", required=True, help="YYYY-MM-DD: months ending on or before this day")
        parser.add_argument("--dry-run", action="store_true", help="say what would be retired, change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            before = date.fromisoformat(options["before"])
        except ValueError as exc:
            raise CommandError(f"--before {options['before']!r} is not a date: give YYYY-MM-DD") from exc
        months = months_to_retire(before=before)
        if not months:
            self.stdout.write(f"no month of raw records ends on or before {before}: nothing to retire")
            return
        if options["dry_run"]:
            self.stdout.write("would retire: " + ", ".join(f"{month:%Y-%m}" for month in months))
            return
        try:
            retired = records_retire(before=before)
        except RetireRefused as exc:
            raise CommandError(str(exc)) from exc
        for month in retired:
            self.stdout.write(f"retired {month.month:%Y-%m}: {month.records} records, {month.bytes / 1e6:.1f} MB")
