"""Apply the attribution rules (results.store.attribution) to every stored record again, moving the rollups with
them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from results.store.attribution import records_reattribute, scope_everything


class Command(BaseCommand):
    help = "Give every stored record the activity the attribution rules give it now (and move its rollups)."

    def handle(self, *args: Any, **options: Any) -> None:
        changed = records_reattribute(scope=scope_everything())
        self.stdout.write(f"{changed} records changed activity")
