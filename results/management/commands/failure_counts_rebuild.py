"""Count the failure causes (results.store.failure_counts) again from every record: after a bulk load that wrote records
around results.services (and rebuilt the rollups), or to check them. Refused once raw records were retired."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from results.store.failure_counts import failure_counts_rebuild


class Command(BaseCommand):
    help = "Rebuild the failure-causes page's stored counts (per link, category, hour, message) from the records."

    def handle(self, *args: Any, **options: Any) -> None:
        began = time.perf_counter()
        try:
            failed = failure_counts_rebuild()
        except RuntimeError as exc:  # raw records were retired
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{failed} failed records counted in {time.perf_counter() - began:.1f} s")
