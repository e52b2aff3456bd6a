"""The clock names the activities that can claim the same transfers (challenges.conflicts)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from challenges.conflicts import conflicts_find
from challenges.models import Activity
from tests.challenges.factories import ActivityFactory, ChallengeFactory, TargetFactory
from tests.sites.factories import ExperimentFactory, SiteFactory

pytestmark = pytest.mark.django_db


def activities(*made: Activity) -> list[Activity]:
    return list(Activity.objects.filter(pk__in=[a.pk for a in made]).prefetch_related("targets").order_by("pk"))


def test_pairs_that_share_experiment_time_flow_and_ddm_names_conflict() -> None:
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    cern, cnaf, kit = (SiteFactory(name=n, experiments=[atlas, cms]) for n in ("CERN", "CNAF", "KIT"))
    challenge = ChallengeFactory(slug="dc")
    export = ActivityFactory(challenge=challenge, name="export", experiment=atlas)
    functional = ActivityFactory(challenge=challenge, name="functional", experiment=atlas)
    named = ActivityFactory(challenge=challenge, name="named", experiment=atlas, ddm_activities=["T0 Export"])
    other_week = ActivityFactory(
        challenge=challenge, name="later", experiment=atlas, start=export.end, end=export.end + timedelta(days=7)
    )
    cms_import = ActivityFactory(challenge=challenge, name="cms", experiment=cms)
    for activity in (export, functional, named, other_week, cms_import):
        TargetFactory(activity=activity, site=cnaf, direction="in")
    kit_out = ActivityFactory(challenge=challenge, name="kit out", experiment=atlas, ddm_activities=["t0 export"])
    TargetFactory(activity=kit_out, site=kit, direction="out")
    link = ActivityFactory(challenge=challenge, name="link", experiment=atlas, ddm_activities=["Express"])
    TargetFactory(activity=link, site=None, direction="", link_from=cern, link_to=kit)

    found = {
        (c.first.name, c.second.name): c.flow
        for c in conflicts_find(activities(export, functional, named, other_week, cms_import, kit_out, link))
    }
    assert found == {
        ("export", "functional"): "transfers into CNAF",  # both take any DDM activity
        ("named", "kit out"): "KIT → CNAF",  # the same DDM name, ignoring case; out of KIT and into CNAF
    }


def test_the_clock_page_lists_the_conflicts(client: Client) -> None:
    atlas = ExperimentFactory(name="ATLAS")
    cnaf = SiteFactory(name="CNAF", experiments=[atlas])
    challenge = ChallengeFactory(slug="dc")
    for name in ("ATLAS export", "ATLAS functional"):
        TargetFactory(activity=ActivityFactory(challenge=challenge, name=name, experiment=atlas), site=cnaf)
    client.force_login(get_user_model().objects.create_user("viewer"))
    text = client.get("/challenges/dc/").content.decode()
    assert "Activities that claim the same traffic" in text
    assert "ATLAS export and ATLAS functional both claim ATLAS transfers into CNAF" in text
