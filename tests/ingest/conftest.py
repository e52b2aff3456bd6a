"""The registry the ingestion tests match against, and API clients of each role."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from sites.models import Experiment, NetworkHost, Site

from .helpers import client_for, endpoint


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


@pytest.fixture
def coordinator(world: dict[str, Any]) -> APIClient:
    return client_for("coordinator")


@pytest.fixture
def atlas_ddm(world: dict[str, Any]) -> APIClient:
    return client_for("ddm", experiment=world["atlas"])
