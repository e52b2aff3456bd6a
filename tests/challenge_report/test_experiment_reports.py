"""The experiments' perspective: an experiment's writer (its DDM role) writes its report on a challenge and no other
experiment's; drafts are read by their writers only; coordinators review; the report shows what was told."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from challenge_report.content import content_json, report_content
from reports.models import ExperimentReport

from .world import World, user_with

pytestmark = pytest.mark.django_db
URL = "/api/v1/experiment-reports/"


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_an_experiments_writer_writes_its_report_and_submits_it(world: World) -> None:
    ExperimentReport.objects.filter(experiment=world.cms).delete()
    cms = _client(user_with("ddm", experiment=world.cms))
    body = {"challenge": "dc22", "experiment": "CMS", "narrative": "CMS *steady*", "lessons": "one\ntwo",
            "problems": [{"category": "storage", "ticket": "GGUS 1", "description": "slow"}],
            "actions": [{"description": "restarted", "taken_at": "2022-03-14T03:00:00Z"}]}  # fmt: skip
    made = cms.post(URL, body, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["narrative_html"] == "<p>CMS <em>steady</em></p>"
    assert made.json()["problems"][0]["ticket_url"].endswith("ticket_id=1")
    submitted = cms.post(f"{URL}{made.json()['id']}/submit/")
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted"


def test_a_writer_of_another_experiment_is_refused_and_nothing_is_stored(world: World) -> None:
    cms = _client(user_with("ddm", experiment=world.cms))
    response = cms.post(URL, {"challenge": "dc22", "experiment": "ATLAS", "narrative": "x"}, format="json")
    assert response.status_code == 403 and "ATLAS's contacts" in response.json()["detail"]
    atlas_report = ExperimentReport.objects.get(experiment=world.atlas)
    assert cms.patch(f"{URL}{atlas_report.pk}/", {"narrative": "y"}, format="json").status_code == 404
    assert ExperimentReport.objects.get(experiment=world.atlas).narrative.startswith("ATLAS exported")


def test_a_site_admin_or_viewer_writes_no_experiment_report(world: World) -> None:
    for user in (user_with("viewer"), user_with("site-admin", site=world.sites["CNAF"])):
        body = {"challenge": "dc22", "experiment": "ATLAS", "narrative": "x"}
        assert _client(user).post(URL, body, format="json").status_code == 403


def test_a_draft_is_read_by_its_writers_only(world: World) -> None:
    viewer = _client(user_with("viewer")).get(URL).json()
    assert [row["experiment"] for row in viewer["results"]] == ["ATLAS"]
    cms = _client(user_with("ddm", experiment=world.cms)).get(URL).json()
    assert [row["experiment"] for row in cms["results"]] == ["CMS"]  # its own draft; not ATLAS's at all


def test_a_coordinator_accepts_and_then_only_coordinators_change_it(world: World) -> None:
    report = ExperimentReport.objects.get(experiment=world.atlas)
    coordinator = _client(user_with("coordinator"))
    assert coordinator.post(f"{URL}{report.pk}/accept/").json()["status"] == "accepted"
    atlas = _client(user_with("ddm", experiment=world.atlas))
    refused = atlas.patch(f"{URL}{report.pk}/", {"narrative": "late"}, format="json")
    assert refused.status_code == 403 and "accepted" in refused.json()["detail"]
    assert atlas.post(f"{URL}{report.pk}/accept/").status_code == 403


def test_the_report_shows_the_experiments_narrative_and_gathers_lessons(world: World) -> None:
    content = content_json(report_content(challenge=world.challenge, user=None))
    atlas, cms = content["experiments"]
    assert "1.5 GB/s" in atlas["narrative"]["narrative_html"]
    assert atlas["narrative"]["problems"][0]["ticket"] == "GGUS 157000"
    assert cms["narrative"] is None  # a draft is not what CMS said yet
    assert [item["text"] for item in content["lessons"]["lessons"]] == [
        "Ask sites for their WebDAV limits early", "Tape writes need a bigger buffer",
    ]  # fmt: skip
    assert content["lessons"]["next_steps"] == [
        {"who": "ATLAS", "text": "Repeat the PIC link with 200 files in flight"}
    ]
