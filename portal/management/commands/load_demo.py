"""`manage.py load_demo`: the demo account, ready to log in."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from portal.demo import demo_user_ensure


class Command(BaseCommand):
    help = "Create (or refresh) the demo account and print its login."

    def handle(self, *args: Any, **options: Any) -> None:
        username, password = demo_user_ensure()
        self.stdout.write(f"demo login: {username} / {password}")
