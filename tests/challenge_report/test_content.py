"""The report's content (JSON): every section of the outline, and the targets' figures equal to the rates API's."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from challenge_report.content import content_json, report_content

from .world import World, user_with

pytestmark = pytest.mark.django_db


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_every_target_row_equals_the_rates_apis(world: World) -> None:
    user = user_with("viewer")
    content = content_json(report_content(challenge=world.challenge, user=user))
    rates = _client(user).get("/api/v1/challenges/dc22/rates/").json()["rows"]
    report_rows = {row["id"]: row for section in content["experiments"] for row in section["targets"]}
    assert len(rates) == 4
    assert report_rows == {row["id"]: row for row in rates}


def test_the_content_holds_every_section_of_the_outline(world: World) -> None:
    content = content_json(report_content(challenge=world.challenge, user=None))
    assert content["state"] == "finished" and content["so_far"] is False and content["notice"] is None
    intro = content["introduction"]
    assert intro["experiments"] == ["ATLAS", "CMS"]
    assert intro["sites"] == ["CERN", "CNAF", "PIC", "TAPE-T1"]
    assert [a["name"] for a in intro["activities"]] == ["atlas-dt", "atlas-tape", "cms-dt"]
    atlas, cms = content["experiments"]
    assert (atlas["experiment"], cms["experiment"]) == ("ATLAS", "CMS")
    assert atlas["failures"]["failures"] == 3
    assert atlas["failures"]["fts_causes"][0] == {
        "category": "TRANSFER", "scope": "DESTINATION", "phase": "TRANSFER", "failures": 3,
    }  # fmt: skip
    assert len(atlas["figures"]) == 3 and all(name in content["figures"] for name in atlas["figures"])
    central = content["central_services"]
    pic = next(link for link in central["links"] if link["destination"] == "PIC")
    assert pic["decisions"] == 2 and pic["limits_seen"] == {"destination": 1, "fts_max_active": 1}
    assert central["fts_failures"][0]["failures"] == 3
    sites = {site["site"]: site for site in content["sites"]}
    assert sites["TAPE-T1"]["tape"] and sites["TAPE-T1"]["tape_runs"][0]["mode"] == "DT"
    cnaf = sites["CNAF"]["report"]
    assert cnaf["outages"][0]["reason"] == "StoRM frontend restarted"
    assert cnaf["problems"][0]["ticket_url"] == "https://ggus.eu/?mode=ticket_info&ticket_id=156789"
    assert sites["CERN"]["report"] is None  # a draft is not what a site said yet
    into_cnaf = {row["experiment"]: row for row in sites["CNAF"]["traffic"]}
    assert into_cnaf["ATLAS"]["in_volume"] == pytest.approx(10 * 3600 * 1.5e9)  # the sweep counts for no activity
    kinds = [event["kind"] for event in content["timeline"]]
    assert kinds == ["outage began", "alert opened", "alert acknowledged", "outage ended", "alert resolved",
                     "site action"]  # fmt: skip
    (sweep,) = content["network"]
    assert sweep["functional"][0]["rows"][0]["cells"][0]["ok"] is True
    assert sweep["throughput"][0]["rows"][0]["cells"][0]["aggregate_rate"] == pytest.approx(4e9 / 60)
    assert sweep["network"]["rows"][0]["source"] == "CNAF"
    summary = content["summary"]
    assert summary["total"]["targets"] == 4
    assert {row["experiment"] for row in summary["by_experiment"]} == {"ATLAS", "CMS"}
    titles = [section["title"] for section in content["definitions"]]
    assert "Target versus achieved" in titles and "stable rate" in content["definitions"][1]["markdown"]


def test_a_ddm_service_reads_only_its_experiments_part(world: World) -> None:
    user = user_with("ddm", experiment=world.cms)
    content = content_json(report_content(challenge=world.challenge, user=user))
    assert [section["experiment"] for section in content["experiments"]] == ["CMS"]
    assert "ATLAS" not in str(content["central_services"]["injection_plans"])
    assert all(event["kind"] != "alert opened" for event in content["timeline"])
    assert content["network"] == []


def test_a_running_challenge_is_reported_so_far(world: World) -> None:
    from datetime import timedelta

    from .world import at

    content = content_json(report_content(challenge=world.challenge, user=None, now=at(300) + timedelta(seconds=5)))
    assert content["state"] == "running" and content["so_far"] is True
    assert content["notice"] == "Challenge running: figures so far, at 2022-03-14 05:00 UTC"
    rows = [row for section in content["experiments"] for row in section["targets"]]
    assert all(row["so_far"] is not None for row in rows if row["activity"] != "atlas-tape")


def test_a_mid_challenge_report_reads_alerts_and_decisions_up_to_its_as_of_only(world: World) -> None:
    """Made as of 05:00 while later data exists (a report rebuilt for an earlier minute, or records that came in
    after it): FTS's 05:00 decision and the alert's acknowledgement at 02:10 are after the window of a report of
    02:08 or 05:00, as the targets' figures leave out the minutes from `at` on."""
    from datetime import timedelta

    from challenge_report.markdown import report_markdown
    from challenge_report.render import report_html

    from .world import T0, at

    content = report_content(challenge=world.challenge, user=None, now=at(300) + timedelta(seconds=5))
    assert content["events_window"] == {"start": T0, "end": at(300)}
    pic = next(link for link in content["central_services"]["links"] if link["destination"] == "PIC")
    assert (pic["decisions"], pic["active_min"], pic["active_max"]) == (1, 60, 60)  # not the 05:00 one
    assert pic["latest"]["at"] == at(60) and pic["limits_seen"] == {"fts_max_active": 1}
    assert pic["limited_by"] == "fts_max_active"  # its latest decision before 05:00, not the destination's limit
    page = report_html(content_json(content), figures={})
    assert "FTS's optimizer decisions from 2022-03-14 00:00 to 2022-03-14 05:00 UTC." in page
    assert "Alerts from 2022-03-14 00:00 to 2022-03-14 05:00 UTC." in page
    text = report_markdown(content_json(content))
    assert "_FTS's optimizer decisions from 2022-03-14 00:00 to 2022-03-14 05:00 UTC._" in text
    assert "_Alerts from 2022-03-14 00:00 to 2022-03-14 05:00 UTC._" in text

    early = report_content(challenge=world.challenge, user=None, now=at(128) + timedelta(seconds=30))
    assert [event["kind"] for event in early["timeline"] if event["kind"].startswith("alert")] == ["alert opened"]
    later = report_content(challenge=world.challenge, user=None, now=at(301))
    pic = next(link for link in later["central_services"]["links"] if link["destination"] == "PIC")
    assert pic["decisions"] == 2 and pic["limited_by"] == "destination"  # from 05:01 on, the 05:00 decision counts


def test_a_mid_challenge_report_counts_the_failures_up_to_its_as_of_only(world: World) -> None:
    """The three ATLAS failures ended at 00:31, 00:32 and 00:33: a report as of 00:32 counts the first only, in FTS's
    causes of the central services and in ATLAS's failure anatomy (read from the records: the stored counts have
    no time cut), as its targets' figures leave out the minutes from `at` on; at the end it counts all three."""
    from datetime import timedelta

    from .world import at

    early = content_json(report_content(challenge=world.challenge, user=None, now=at(32) + timedelta(seconds=5)))
    assert early["events_window"]["end"] == at(32).isoformat().replace("+00:00", "Z")
    atlas = next(section for section in early["experiments"] if section["experiment"] == "ATLAS")
    assert atlas["failures"]["failures"] == 1 and atlas["failures"]["computed"] == "records"
    assert [row["failures"] for row in atlas["failures"]["fts_causes"]] == [1]
    assert sum(row["failures"] for row in atlas["failures"]["hourly"]) == 1
    assert [row["failures"] for row in early["central_services"]["fts_failures"]] == [1]

    final = content_json(report_content(challenge=world.challenge, user=None))
    atlas = next(section for section in final["experiments"] if section["experiment"] == "ATLAS")
    assert atlas["failures"]["failures"] == 3 and atlas["failures"]["computed"] == "stored"
    assert [row["failures"] for row in final["central_services"]["fts_failures"]] == [3]


def test_failures_up_to_the_present_minute_are_read_from_the_stored_counts(world: World) -> None:
    """A report of a running challenge is taken at the present's last whole minute: its failures come from the
    stored counts (a few rows, whatever the records), not from the records; a cut at an earlier minute reads the
    records."""
    from datetime import timedelta

    from django.utils import timezone

    from results.failures.causes import failures_for_challenge
    from results.store.rollups import minute_floor

    from .world import at

    world.challenge.end = timezone.now() + timedelta(days=1)
    world.challenge.save(update_fields=["end"])
    present = failures_for_challenge(challenge=world.challenge, until=minute_floor(timezone.now()))
    assert present.computed == "stored" and sum(link.total for link in present.links) == 3
    earlier = failures_for_challenge(challenge=world.challenge, until=at(32))
    assert earlier.computed == "records" and sum(link.total for link in earlier.links) == 1
