"""What the ingestion tests share: registry rows, API clients of each role, a target around the FTS sample."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from sites.models import Experiment, Site, StorageEndpoint
from sites.tokens import token_issue


def endpoint(site: Site, url: str, rses: list[str] | None = None) -> StorageEndpoint:
    item = StorageEndpoint(site=site, rse_names=rses or [])
    item.set_url(url)
    item.save()
    return item


def client_for(role: str, *, experiment: Experiment | None = None, username: str | None = None) -> APIClient:
    _token, key = token_issue(username=username or f"{role}-{experiment or 'all'}", role=role, experiment=experiment)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def uam_target(world: dict[str, Any], *, direction: str = "in", site: str = "uam") -> Target:
    """A target of ATLAS traffic into UAM around the FTS sample's transfer (2017-04-26 14:35 UTC)."""
    moment = datetime(2017, 4, 26, 14, 35, tzinfo=UTC)
    challenge, _ = Challenge.objects.get_or_create(
        slug="dc17",
        defaults={
            "name": "DC17",
            "start": moment - timedelta(days=1),
            "end": moment + timedelta(days=1),
            "max_window": 60,
            "stable_window": 60,
        },
    )
    activity = Activity.objects.create(
        challenge=challenge,
        name=f"atlas-{direction}-{site}",
        experiment=world["atlas"],
        mode="DT",
        kind="transfer",
        start=moment,
        end=moment + timedelta(minutes=1),
    )
    return Target.objects.create(activity=activity, site=world[site], direction=direction, rate=1e6)
