"""The registry the ingestion tests match against, and API clients of each role."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from sites.models import Experiment, NetworkHost, Site, StorageEndpoint
from sites.tokens import token_issue


def endpoint(site: Site, url: str, rses: list[str] | None = None) -> StorageEndpoint:
    item = StorageEndpoint(site=site, rse_names=rses or [])
    item.set_url(url)
    item.save()
    return item


@pytest.fixture
def world(db: None) -> dict[str, Any]:
    """ATLAS, CMS and DUNE; CNAF with the storage of the FTS sample's source; UAM exists but its storage is not
    registered (the sample's destination is an unknown host); perfSONAR hosts at CERN and CNAF."""
    experiments = {name: Experiment.objects.create(name=name) for name in ("ATLAS", "CMS", "DUNE")}
    cnaf = Site.objects.create(name="INFN-T1", tier=1, country="IT")
    uam = Site.objects.create(name="UAM-LCG2", tier=2, country="ES")
    cern = Site.objects.create(name="CERN-PROD", tier=0, country="CH")
    endpoint(cnaf, "srm://storm-fe.cr.cnaf.infn.it:8444/srm/managerv2", ["INFN-T1_DATADISK"])
    NetworkHost.objects.create(site=cern, address="ps-bandwidth.cern.ch")
    NetworkHost.objects.create(site=cnaf, address="perfsonar-bw.cnaf.infn.it")
    return {**{name.lower(): item for name, item in experiments.items()}, "cnaf": cnaf, "uam": uam, "cern": cern}


def client_for(role: str, *, experiment: Experiment | None = None, username: str | None = None) -> APIClient:
    _token, key = token_issue(username=username or f"{role}-{experiment or 'all'}", role=role, experiment=experiment)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def coordinator(world: dict[str, Any]) -> APIClient:
    return client_for("coordinator")


@pytest.fixture
def atlas_ddm(world: dict[str, Any]) -> APIClient:
    return client_for("ddm", experiment=world["atlas"])


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
