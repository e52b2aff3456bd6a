"""Compute the rollups (per minute, per hour, per flow and hour) again from every record: after a bulk load that
wrote records around results.services, or after sites were matched by hand in SQL. Readers of rates wait until it
commits (the tables are emptied and refilled in one transaction, their indexes built once at the end)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from results.store.rollups import rollups_rebuild


class Command(BaseCommand):
    help = "Rebuild the rate rollups (minute, hour, flow) from the records, in bulk."

    def handle(self, *args: Any, **options: Any) -> None:
        began = time.perf_counter()
        try:
            rows = rollups_rebuild()
        except RuntimeError as exc:  # raw records were retired: their rollups cannot be made again
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{rows} minute rows stored in {time.perf_counter() - began:.1f} s")
