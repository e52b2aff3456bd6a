"""`manage.py create_token --user NAME --role ROLE [--site S] [--experiment E] [--name N] [--days D]`.

Creates the user when missing (without a usable password), grants the role, issues a token and prints its key
alone on the last line, so scripts can take it with `tail -n 1`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from sites.choices import Role
from sites.models import Experiment, Site
from sites.tokens import token_issue


class Command(BaseCommand):
    help = "Issue an API token for a user with a role; the key is printed once, alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="username; created without a password when missing")
        parser.add_argument("--role", required=True, help=f"one of {', '.join(Role.values)}")
        parser.add_argument("--site", help="site name (a site admin's site)")
        parser.add_argument("--experiment", help="experiment name, any case (a DDM service's experiment)")
        parser.add_argument("--name", default="", help="what the token is for")
        parser.add_argument("--days", type=int, default=None, help="lifetime (default API_TOKEN_DAYS)")

    def handle(self, *args: Any, **options: Any) -> None:
        role = options["role"]
        if role not in Role.values:
            raise CommandError(f"unknown role {role!r}: one of {', '.join(Role.values)}")
        site = experiment = None
        if options["site"]:
            site = Site.objects.filter(name=options["site"]).first()
            if site is None:
                raise CommandError(f"no site named {options['site']!r}")
        if options["experiment"]:
            experiment = Experiment.objects.filter(name__iexact=options["experiment"]).first()
            if experiment is None:
                raise CommandError(f"no experiment named {options['experiment']!r}")
        days = settings.API_TOKEN_DAYS if options["days"] is None else options["days"]
        try:
            token, key = token_issue(
                username=options["user"], role=role, site=site, experiment=experiment, name=options["name"], days=days
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        scope = f" of {site or experiment}" if site or experiment else ""
        self.stdout.write(
            f"API token {token.prefix}... for {token.user} ({role}{scope}), "
            f"expires {token.expires:%Y-%m-%d %H:%M} UTC; the key below is shown only now:"
        )
        self.stdout.write(key)
