"""`manage.py load_demo`: the demo account, ready to log in."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand

from portal.demo import demo_challenge_load, demo_sites_load, demo_sweep_ensure, demo_user_ensure


class Command(BaseCommand):
    help = (
        "Load the testbed's sites into the registry, the demo challenge and the demo sweep, create (or refresh) "
        "the demo account, print its login."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--without-load",
            action="store_true",
            help="leave out the steady load the clock keeps running (for deployments where nothing should run by "
            "itself, such as the fault suite's)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username, password = demo_user_ensure()
        summary = demo_sites_load()
        if summary is None:
            self.stdout.write("no testbed sites document yet (start the testbed first): registry left as it is")
        else:
            self.stdout.write(f"testbed sites loaded: {summary}")
            loaded = demo_challenge_load(steady_load=not options["without_load"])
            self.stdout.write(f"demo challenge loaded: {loaded}")
            try:
                sweep, started = demo_sweep_ensure(username)
            except ValidationError as exc:
                self.stdout.write(f"demo sweep not started: {'; '.join(exc.messages)}")
            else:
                self.stdout.write(
                    f"demo sweep {sweep.pk}: {'started' if started else sweep.state} (/sweeps/{sweep.pk}/)"
                )
        self.stdout.write(f"demo login: {username} / {password}")
