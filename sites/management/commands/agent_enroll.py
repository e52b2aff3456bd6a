"""`manage.py agent_enroll SITE --portal-url URL --output FILE [--name N] [--ca-bundle PATH] [--spool DIR]`.

Enrols an agent for a site and writes its configuration (mode 0600): the portal's URL, the agent's key (shown
nowhere else), its site and name, how to trust the portal. Nothing of the portal's own secrets goes in it. With
`--rotate` the site's agent of that name gets a new key instead (the old one stops working now).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sites.agents import agent_config, agent_enroll, agent_rotate
from sites.models import Site, SiteAgent


class Command(BaseCommand):
    help = "Enrol a site's agent (or --rotate its key) and write its configuration file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("site", help="the site's name in the registry")
        parser.add_argument("--portal-url", required=True, help="the portal as the site reaches it, https://...")
        parser.add_argument("--output", required=True, help="the agent's configuration file to write (0600)")
        parser.add_argument("--name", default="agent", help="which agent of the site (default: agent)")
        parser.add_argument("--ca-bundle", default="", help="a CA bundle the agent trusts the portal with")
        parser.add_argument("--spool", default="", help="where the agent keeps results not yet delivered")
        parser.add_argument("--slots", type=int, default=8, help="jobs the agent runs at once (default 8)")
        parser.add_argument("--rotate", action="store_true", help="a new key for the agent that exists")

    def handle(self, *args: Any, **options: Any) -> None:
        site = Site.objects.filter(name=options["site"]).first()
        if site is None:
            raise CommandError(f"no site named {options['site']!r}")
        url = urlsplit(options["portal_url"])
        if url.scheme not in ("http", "https") or not url.hostname:
            raise CommandError(f"--portal-url must be an http(s) URL, not {options['portal_url']!r}")
        if options["slots"] < 1:
            raise CommandError("--slots must be at least 1")
        try:
            if options["rotate"]:
                agent = SiteAgent.objects.filter(site=site, name=options["name"], revoked__isnull=True).first()
                if agent is None:
                    raise CommandError(f"{site.name} has no live agent named {options['name']!r} to rotate")
                key = agent_rotate(agent=agent)
            else:
                agent, key = agent_enroll(site=site, name=options["name"])
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        config = agent_config(
            agent=agent,
            key=key,
            portal_url=options["portal_url"],
            ca_bundle=options["ca_bundle"],
            spool=options["spool"],
            slots=options["slots"],
        )
        output = Path(options["output"])
        output.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(config, handle, indent=2)
            handle.write("\n")
        done = "rotated the key of" if options["rotate"] else "enrolled"
        self.stdout.write(f"{done} agent {agent} ({agent.prefix}...): its configuration is in {output}")
