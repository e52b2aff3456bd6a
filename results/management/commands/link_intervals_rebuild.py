"""Compute the FROM x TO matrix's stored unions (results.store.link_intervals) again from every record: after a bulk
load that wrote records around results.services (and rebuilt the rollups), or to check them."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from results.store.link_intervals import link_intervals_rebuild


class Command(BaseCommand):
    help = "Rebuild the matrix's per-link unions of transfer intervals, totals and error counts from the records."

    def handle(self, *args: Any, **options: Any) -> None:
        began = time.perf_counter()
        try:
            islands = link_intervals_rebuild()
        except RuntimeError as exc:  # raw records were retired
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{islands} intervals stored in {time.perf_counter() - began:.1f} s")
