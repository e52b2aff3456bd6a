"""manage.py alerts_evaluate [--challenge SLUG]: evaluate the alerts of the running challenges (or one) once, as
beat does every minute, and say what opened and what resolved."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from challenges.models import Challenge

from ...alerts import alerts_evaluate, challenges_to_evaluate


class Command(BaseCommand):
    help = "Evaluate the live alerts of the running challenges (or of one) once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--challenge", help="the slug of one challenge (default: every running challenge)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["challenge"]:
            challenge = Challenge.objects.filter(slug=options["challenge"]).first()
            if challenge is None:
                raise CommandError(f"no challenge with slug {options['challenge']!r}")
            challenges = [challenge]
        else:
            challenges = list(challenges_to_evaluate())
        for challenge in challenges:
            summary = alerts_evaluate(challenge=challenge)
            self.stdout.write(
                f"{challenge.slug}: {len(summary.opened)} opened, {len(summary.resolved)} resolved, "
                f"{summary.kept} still open"
            )
            for alert in summary.opened:
                self.stdout.write(f"  opened {alert.kind} {alert.subject}: {alert.message}")
            for alert in summary.resolved:
                self.stdout.write(f"  resolved {alert.kind} {alert.subject}")
