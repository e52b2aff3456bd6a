"""List the copies ended runs left on their destinations (kept, or a clean-up that failed) and delete them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from measure.cleanup import copies_delete
from runs.choices import CopiesState
from runs.copies import run_copies_deleted, run_copies_to_delete, runs_with_copies
from runs.credentials import delete_grants
from runs.tasks import gfal2_context


class Command(BaseCommand):
    help = (
        "List the runs whose copies are still on their destinations (keep_copies, or a clean-up that failed); "
        "with --delete, delete them here with gfal2 (all listed, or those of --run)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", type=int, action="append", default=[], help="only this run (repeatable)")
        parser.add_argument("--delete", action="store_true", help="delete the listed runs' copies")

    def handle(self, *args: Any, **options: Any) -> None:
        runs = runs_with_copies()
        if options["run"]:
            runs = runs.filter(pk__in=options["run"])
            missing = set(options["run"]) - set(runs.values_list("pk", flat=True))
            if missing:
                raise CommandError(f"no kept copies for run(s) {', '.join(map(str, sorted(missing)))}")
        listed = list(runs)
        if not listed:
            self.stdout.write("no run keeps copies on its destinations")
            return
        for run in listed:
            size = (run.copies_bytes or 0) / 1e9
            name = run.activity.name if run.activity else "ad hoc"
            self.stdout.write(
                f"run {run.pk} ({run.kind}, {name}): {run.get_copies_display()}, {size:.3g} GB"
                f"{' · ' + run.copies_message if run.copies_message else ''}"
            )
        if not options["delete"]:
            self.stdout.write("add --delete to delete them")
            return
        for run in listed:
            wanted = run_copies_to_delete(run.pk)
            grants = delete_grants(wanted.urls, wanted.directories)
            result = copies_delete(gfal2_context(grants), wanted.urls, wanted.directories)
            run_copies_deleted(run.pk, deleted=result.deleted, errors=result.errors)
            run.refresh_from_db(fields=["copies", "copies_message"])
            line = f"run {run.pk}: {run.get_copies_display()}, {run.copies_message}"
            self.stdout.write(line if run.copies == CopiesState.DELETED else self.style.ERROR(line))
