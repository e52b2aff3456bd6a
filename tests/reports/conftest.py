"""A challenge with two sites and their admins, a coordinator and a viewer, for the site report tests."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from challenges.models import Challenge, Target
from sites.choices import Role
from sites.models import Site
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory, ChallengeFactory
from tests.reports.helpers import T0, at
from tests.sites.factories import ExperimentFactory, SiteFactory


@pytest.fixture
def world(db: None) -> dict[str, Any]:
    """TC22 (2022-03-07 to 03-26) with an ATLAS activity and a target into CNAF; sites CNAF and PIC with one
    admin each; a coordinator and a viewer."""
    users = get_user_model().objects
    atlas = ExperimentFactory(name="ATLAS")
    cnaf: Site = SiteFactory(name="CNAF", experiments=[atlas])
    pic: Site = SiteFactory(name="PIC", experiments=[atlas])
    challenge: Challenge = ChallengeFactory(slug="tc22", name="TC22", start=T0, end=at(19 * 24))
    activity = ActivityFactory(challenge=challenge, name="ATLAS DT", experiment=atlas, start=T0, end=at(7 * 24))
    target = Target.objects.create(activity=activity, site=cnaf, direction="in", rate=1e9)
    cnaf_admin, pic_admin = users.create_user("cnaf-admin"), users.create_user("pic-admin")
    membership_grant(user=cnaf_admin, role=Role.SITE_ADMIN, site=cnaf)
    membership_grant(user=pic_admin, role=Role.SITE_ADMIN, site=pic)
    coordinator, viewer = users.create_user("coordinator"), users.create_user("viewer")
    membership_grant(user=coordinator, role=Role.COORDINATOR)
    return {
        "challenge": challenge,
        "activity": activity,
        "target": target,
        "cnaf": cnaf,
        "pic": pic,
        "cnaf_admin": cnaf_admin,
        "pic_admin": pic_admin,
        "coordinator": coordinator,
        "viewer": viewer,
    }
