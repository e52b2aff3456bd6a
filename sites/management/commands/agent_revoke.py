"""`manage.py agent_revoke SITE [--name N]`: the agent's key stops working now; the site's work goes to its Celery
queue again (if a worker serves it) until an agent is enrolled anew."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sites.agents import agent_revoke
from sites.models import SiteAgent


class Command(BaseCommand):
    help = "Revoke a site's agent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("site", help="the site's name")
        parser.add_argument("--name", default="agent", help="which agent of the site (default: agent)")

    def handle(self, *args: Any, **options: Any) -> None:
        agent = SiteAgent.objects.filter(site__name=options["site"], name=options["name"], revoked__isnull=True).first()
        if agent is None:
            raise CommandError(f"{options['site']} has no live agent named {options['name']!r}")
        agent_revoke(agent=agent)
        self.stdout.write(f"revoked agent {agent}")
