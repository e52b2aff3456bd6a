"""The experiment report pages: the list per challenge, a report with its buttons, and its form, for the
experiment's contacts (its DDM role, the access policy's "narrate") and coordinators, who accept a report or ask for
changes; another experiment's contacts are refused and nothing is stored."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils.html import escape

from reports.choices import ReportStatus
from reports.models import ExperimentReport
from sites.choices import Role
from sites.roles import membership_grant
from tests.challenges.factories import ActivityFactory
from tests.reports.helpers import T0, at
from tests.sites.factories import ExperimentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(world: dict[str, Any]) -> dict[str, Any]:
    """The site report tests' world with CMS beside ATLAS in TC22, and each experiment's DDM contact."""
    atlas = world["activity"].experiment
    cms: Any = ExperimentFactory(name="CMS")
    ActivityFactory(challenge=world["challenge"], name="CMS DT", experiment=cms, start=T0, end=at(24))
    users = get_user_model().objects
    atlas_ddm, cms_ddm = users.create_user("atlas-ddm"), users.create_user("cms-ddm")
    membership_grant(user=atlas_ddm, role=Role.DDM, experiment=atlas)
    membership_grant(user=cms_ddm, role=Role.DDM, experiment=cms)
    viewer = world["viewer"]
    membership_grant(user=viewer, role=Role.VIEWER)
    return world | {"atlas": atlas, "cms": cms, "atlas_ddm": atlas_ddm, "cms_ddm": cms_ddm}


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form_data(narrative: str = "ATLAS held **1.5 GB/s** to CNAF <script>x()</script>", **extra: str) -> dict[str, str]:
    data = {
        "narrative": narrative,
        "lessons": "- Ask for WebDAV limits early\n\n* Tape needs a buffer",
        "next_steps": "",
    }
    for prefix in ("problems", "actions"):
        data |= {f"{prefix}-TOTAL_FORMS": "1", f"{prefix}-INITIAL_FORMS": "0", f"{prefix}-MAX_NUM_FORMS": "1000"}
    data |= {
        "problems-0-category": "network",
        "problems-0-ticket": "GGUS 157000",
        "problems-0-description": "PIC link capped at 1 GB/s",
        "actions-0-description": "Doubled FTS actives on CERN -> PIC",
        "actions-0-taken_at": "2022-03-08T03:00",
    }
    return data | extra


def test_the_experiments_contact_writes_its_report_on_the_page_and_submits_it(people: dict[str, Any]) -> None:
    client = client_for(people["atlas_ddm"])
    listed = client.get("/reports/tc22/experiments/").content.decode()
    assert "?experiment=ATLAS" in listed and "?experiment=CMS" not in listed  # it may write ATLAS's only
    assert client.get("/reports/tc22/experiments/new/?experiment=ATLAS").status_code == 200

    response = client.post("/reports/tc22/experiments/new/?experiment=ATLAS", form_data())
    report = ExperimentReport.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/reports/tc22/experiment-reports/{report.pk}/"
    assert (report.experiment, report.status, report.author) == (people["atlas"], "draft", people["atlas_ddm"])
    assert report.problems.get().ticket == "GGUS 157000" and report.actions.get().taken_at == at(27)
    page = client.get(f"/reports/tc22/experiment-reports/{report.pk}/").content.decode()
    assert "<strong>1.5 GB/s</strong>" in page and "<script>" not in page
    assert "<li>Ask for WebDAV limits early</li>" in page and "<li>Tape needs a buffer</li>" in page
    assert 'name="submit-report"' in page and 'name="accept"' not in page

    assert client.post(f"/reports/tc22/experiment-reports/{report.pk}/submit/").status_code == 302
    report.refresh_from_db()
    assert report.status == ReportStatus.SUBMITTED and report.submitted_at is not None


def test_another_experiments_contact_may_not_write_or_edit_it_and_nothing_is_stored(people: dict[str, Any]) -> None:
    report = ExperimentReport.objects.create(
        challenge=people["challenge"], experiment=people["atlas"], status="submitted", narrative="ATLAS own words"
    )
    cms = client_for(people["cms_ddm"])
    refused = cms.post("/reports/tc22/experiments/new/?experiment=ATLAS", form_data(narrative="CMS was here"))
    assert refused.status_code == 403
    assert (
        escape("Only ATLAS's contacts (its DDM role) or a coordinator write ATLAS's report.")
        in refused.content.decode()
    )
    # It does not read ATLAS's report at all: the edit is no door to it.
    assert cms.get(f"/reports/tc22/experiment-reports/{report.pk}/edit/").status_code == 404
    assert cms.post(f"/reports/tc22/experiment-reports/{report.pk}/edit/", form_data("CMS")).status_code == 404
    assert cms.post(f"/reports/tc22/experiment-reports/{report.pk}/submit/").status_code == 404
    # A viewer reads it, and is refused its edit with the reason.
    viewer = client_for(people["viewer"])
    assert "ATLAS own words" in viewer.get(f"/reports/tc22/experiment-reports/{report.pk}/").content.decode()
    edit = viewer.post(f"/reports/tc22/experiment-reports/{report.pk}/edit/", form_data(narrative="viewer"))
    assert edit.status_code == 403 and escape("write ATLAS's report") in edit.content.decode()
    report.refresh_from_db()
    assert report.narrative == "ATLAS own words" and not report.problems.exists()
    assert ExperimentReport.objects.count() == 1


def test_a_coordinator_asks_for_changes_then_accepts_and_then_only_coordinators_edit(people: dict[str, Any]) -> None:
    report = ExperimentReport.objects.create(
        challenge=people["challenge"], experiment=people["atlas"], status="submitted", narrative="first"
    )
    coordinator, atlas = client_for(people["coordinator"]), client_for(people["atlas_ddm"])
    detail = f"/reports/tc22/experiment-reports/{report.pk}/"
    assert 'name="accept"' in coordinator.get(detail).content.decode()
    assert atlas.post(detail + "accept/").status_code == 403  # the contacts do not review their own report

    coordinator.post(detail + "request-changes/")
    report.refresh_from_db()
    assert report.status == ReportStatus.CHANGES_REQUESTED
    assert atlas.post(detail + "edit/", form_data(narrative="second")).status_code == 302
    atlas.post(detail + "submit/")
    coordinator.post(detail + "accept/")
    report.refresh_from_db()
    assert (report.status, report.narrative, report.accepted_by) == ("accepted", "second", people["coordinator"])

    late = atlas.post(detail + "edit/", form_data(narrative="third"))
    assert late.status_code == 403 and "only a coordinator may change it now" in late.content.decode()
    assert coordinator.post(detail + "edit/", form_data(narrative="fixed typo")).status_code == 302
    report.refresh_from_db()
    assert report.narrative == "fixed typo"


def test_a_draft_is_listed_for_its_writers_only_and_a_bad_row_stores_nothing(people: dict[str, Any]) -> None:
    ExperimentReport.objects.create(challenge=people["challenge"], experiment=people["cms"], narrative="CMS draft")
    assert "CMS" not in client_for(people["viewer"]).get("/reports/tc22/experiments/").content.decode().split("<h1")[1]
    assert ">CMS</a>" in client_for(people["cms_ddm"]).get("/reports/tc22/experiments/").content.decode()

    bad = client_for(people["atlas_ddm"]).post(
        "/reports/tc22/experiments/new/?experiment=ATLAS", form_data(**{"problems-0-category": "weather"})
    )
    assert bad.status_code == 400 and "weather is not one of the available choices" in bad.content.decode()
    assert not ExperimentReport.objects.filter(experiment=people["atlas"]).exists()
