"""The results pages: target versus achieved with its GB/s numbers, colours and verdicts, filters and exports;
one target over time with its figures and statistics; the comparison with an earlier challenge; access and
query counts."""

from __future__ import annotations

import csv
import html
import io
import itertools
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings

from challenges.models import Activity, Challenge, Target
from results.models import TransferRecord
from results.services import records_store
from sites.models import Experiment, Site
from sites.roles import membership_grant

pytestmark = pytest.mark.django_db

T0 = datetime(2022, 3, 14, tzinfo=UTC)
EARLIER = datetime(2021, 10, 4, tzinfo=UTC)
GB = 1e9
_ids = itertools.count()


def at(minutes: float, origin: datetime = T0) -> datetime:
    return origin + timedelta(minutes=minutes)


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class Plan:
    """Builds activities, targets and records of one challenge, in minutes from its start."""

    def __init__(self, challenge: Challenge, sites: dict[str, Site], experiments: dict[str, Experiment]) -> None:
        self.challenge, self.sites, self.experiments = challenge, sites, experiments

    def target(
        self, experiment: str, name: str, *, start: float, end: float, rate: float, place: str, direction: str = "in"
    ) -> Target:
        activity, _ = Activity.objects.get_or_create(
            challenge=self.challenge,
            name=name,
            defaults={
                "experiment": self.experiments[experiment],
                "mode": "DT",
                "kind": "transfer",
                "start": at(start, self.challenge.start),
                "end": at(end, self.challenge.start),
            },
        )
        if "->" in place:
            source, destination = place.split("->")
            return Target.objects.create(
                activity=activity, link_from=self.sites[source], link_to=self.sites[destination], rate=rate
            )
        return Target.objects.create(activity=activity, site=self.sites[place], direction=direction, rate=rate)

    def moved(
        self, experiment: str, link: str, *, start: float, end: float, rate: float, state: str = "ok"
    ) -> TransferRecord:
        """One record moving `rate` bytes per second over [start, end) minutes."""
        source, destination = link.split("->")
        return TransferRecord(
            experiment=self.experiments[experiment],
            source_site=self.sites[source],
            destination_site=self.sites[destination],
            bytes=int(rate * (end - start) * 60),
            start=at(start, self.challenge.start),
            end=at(end, self.challenge.start),
            state=state,
            mode="pull",
            origin="probe",
            origin_id=f"page{next(_ids)}",
        )


@pytest.fixture
def world() -> dict[str, Any]:
    """This challenge: ATLAS 10 h into CNAF (target 1 GB/s, a steady 1.5 GB/s) and over CERN -> PIC (target
    2 GB/s, 1 GB/s achieved); CMS 1 h into CNAF (target 0.5 GB/s, 1 GB/s achieved). The earlier one: ATLAS
    10 h into CNAF at 0.75 GB/s and into PIC; CMS 1 h into CNAF at 0.25 GB/s."""
    experiments = {name: Experiment.objects.create(name=name) for name in ("ATLAS", "CMS")}
    sites = {
        name: Site.objects.create(name=name, tier=tier, country=country)
        for name, tier, country in (("CERN", 0, "CH"), ("CNAF", 1, "IT"), ("PIC", 1, "ES"))
    }
    earlier = Challenge.objects.create(name="DC21", slug="dc21", start=EARLIER, end=EARLIER + timedelta(days=2))
    challenge = Challenge.objects.create(
        name="TC22",
        slug="tc",
        start=T0,
        end=T0 + timedelta(days=2),
        max_window=3600,
        stable_window=18000,
        compare_with=earlier,
    )
    now, before = Plan(challenge, sites, experiments), Plan(earlier, sites, experiments)
    targets = {
        "atlas-cnaf": now.target("ATLAS", "atlas-dt", start=0, end=600, rate=1 * GB, place="CNAF"),
        "atlas-link": now.target("ATLAS", "atlas-dt", start=0, end=600, rate=2 * GB, place="CERN->PIC"),
        "cms-cnaf": now.target("CMS", "cms-dt", start=0, end=60, rate=0.5 * GB, place="CNAF"),
        "before-atlas-cnaf": before.target("ATLAS", "atlas-21", start=0, end=600, rate=1 * GB, place="CNAF"),
        "before-atlas-pic": before.target("ATLAS", "atlas-21", start=0, end=600, rate=1 * GB, place="PIC"),
        "before-cms-cnaf": before.target("CMS", "cms-21", start=0, end=60, rate=0.5 * GB, place="CNAF"),
    }
    records_store(
        records=[
            now.moved("ATLAS", "CERN->CNAF", start=0, end=300, rate=1.5 * GB),
            now.moved("ATLAS", "CERN->CNAF", start=300, end=600, rate=1.5 * GB),  # ends at B: not counted as a file
            now.moved("ATLAS", "CERN->CNAF", start=5, end=6, rate=1 * GB, state="failed"),
            now.moved("ATLAS", "CERN->PIC", start=0, end=600, rate=1 * GB),
            now.moved("CMS", "CERN->CNAF", start=0, end=60, rate=1 * GB),
            before.moved("ATLAS", "CERN->CNAF", start=0, end=600, rate=0.75 * GB),
            before.moved("CMS", "CERN->CNAF", start=0, end=60, rate=0.25 * GB),
        ]
    )
    return {"challenge": challenge, "earlier": earlier, "plan": now, "targets": targets}


@pytest.fixture
def viewer(client: Client) -> Client:
    client.force_login(get_user_model().objects.create_user("viewer"))
    return client


def row_with(content: str, *texts: str) -> str:
    """The one table row (<tr> ... </tr>) of the page that contains all the texts."""
    rows = [row for row in re.findall(r"<tr[^>]*>.*?</tr>", content, flags=re.S) if all(t in row for t in texts)]
    assert len(rows) == 1, f"{len(rows)} rows contain {texts!r}"
    return rows[0]


def text_of(row: str) -> str:
    """The words of a row's cells, as one line."""
    cells = re.findall(r"<td.*?</td>", row, re.S)
    return " ".join(" ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split()) for cell in cells)


def json_script(content: str, element_id: str) -> Any:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', content, re.S)
    assert match, element_id
    return json.loads(match.group(1))


# --- the list -------------------------------------------------------------------------------------------------


def test_the_results_list_links_every_challenge_to_its_table_and_comparison(
    world: dict[str, Any], viewer: Client
) -> None:
    content = viewer.get("/results/").content.decode()
    assert 'href="/results/tc/"' in content and 'href="/results/dc21/"' in content
    assert 'href="/results/tc/compare/"' in content
    assert 'href="/results/dc21/compare/"' not in content


# --- target versus achieved -----------------------------------------------------------------------------------


def test_the_table_shows_each_target_auto_scaled(world: dict[str, Any], viewer: Client) -> None:
    content = viewer.get("/results/tc/").content.decode()
    atlas = text_of(row_with(content, "ATLAS</td>", "CNAF</td>"))
    # experiment, activity, mode, site, direction, target, average, max, stable, volume, files, ratio, verdict
    assert atlas == "ATLAS atlas-dt DT CNAF in 1 GB/s 1.5 GB/s 1.5 GB/s 1.5 GB/s 54 TB 1 / 1 50.0% met"
    cms = text_of(row_with(content, "CMS</td>"))
    assert cms == "CMS cms-dt DT CNAF in 500 MB/s 1 GB/s 1 GB/s — 3.6 TB 0 / 0 — met"
    link = text_of(row_with(content, "CERN → PIC"))
    assert link.startswith("ATLAS atlas-dt DT CERN → PIC link 2 GB/s 1 GB/s 1 GB/s 1 GB/s 36 TB")


def test_the_table_colours_rates_by_achieved_over_target_and_classes_the_verdict(
    world: dict[str, Any], viewer: Client
) -> None:
    content = viewer.get("/results/tc/").content.decode()
    atlas, link = row_with(content, "ATLAS</td>", "CNAF</td>"), row_with(content, "CERN → PIC")
    assert 'class="num rate r-met" title="150% of the target"' in atlas
    assert 'class="verdict verdict-met"' in atlas
    assert 'class="num rate r-low" title="50% of the target"' in link
    assert 'class="verdict verdict-missed"' in link
    assert 'class="num rate r-none"' in row_with(content, "CMS</td>")  # no stable rate in 1 h


def test_the_table_writes_the_definitions_beside_it(world: dict[str, Any], viewer: Client) -> None:
    content = viewer.get("/results/tc/").content.decode()
    assert "the highest mean rate over any window of <code>max_window</code> (1 h)" in content
    assert "<code>stable_window</code> (5 h); empty when the activity is shorter than that window" in content
    assert "spread uniformly over its real [start, end)" in content


def test_the_table_filters_by_experiment_activity_and_site(world: dict[str, Any], viewer: Client) -> None:
    content = viewer.get("/results/tc/", {"experiment": "cms"}).content.decode()
    assert "cms-dt" in content and "atlas-dt</a>" not in content
    content = viewer.get("/results/tc/", {"site": "PIC"}).content.decode()
    assert "CERN → PIC" in content and "cms-dt</a>" not in content
    content = viewer.get("/results/tc/", {"activity": "atlas-dt", "site": "CNAF"}).content.decode()
    assert row_with(content, "atlas-dt</a>") and "CERN → PIC" not in content


def test_the_json_export_gives_the_api_rows(world: dict[str, Any], viewer: Client) -> None:
    exported = viewer.get("/results/tc/", {"format": "json", "experiment": "ATLAS"}).json()
    api = viewer.get("/api/v1/challenges/tc/rates/", {"experiment": "ATLAS"}).json()
    assert exported["rows"] == api["rows"]
    assert len(exported["rows"]) == 2


def test_the_csv_export_gives_bytes_per_second_with_the_link_in_two_columns(
    world: dict[str, Any], viewer: Client
) -> None:
    response = viewer.get("/results/tc/", {"format": "csv", "site": "PIC"})
    assert response["Content-Type"].startswith("text/csv")
    (row,) = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert (row["site"], row["link_from"], row["link_to"], row["direction"]) == ("", "CERN", "PIC", "")
    assert float(row["target_rate"]) == 2e9 and float(row["average_rate"]) == pytest.approx(1e9)
    assert row["verdict"] == "missed"


def test_the_table_takes_a_bounded_number_of_queries(world: dict[str, Any], viewer: Client) -> None:
    plan = world["plan"]
    for index in range(5):
        plan.target("CMS", f"extra-{index}", start=0, end=120, rate=1 * GB, place="PIC")
    count = Target.objects.filter(activity__challenge=world["challenge"]).count()
    with CaptureQueriesContext(connection) as queries:
        assert viewer.get("/results/tc/").status_code == 200
    # session, user, challenge, targets, filter choices, the site reports' markers, then one rollup query per target
    assert len(queries) <= count + 7, [q["sql"] for q in queries]


def test_the_pages_need_a_login(world: dict[str, Any], client: Client) -> None:
    response = client.get("/results/tc/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


@override_settings(ANONYMOUS_READ=True)
def test_anonymous_readers_see_the_table_when_allowed(world: dict[str, Any], client: Client) -> None:
    assert client.get("/results/tc/").status_code == 200


def test_a_ddm_service_sees_only_its_own_experiments_rows(world: dict[str, Any], client: Client) -> None:
    user = get_user_model().objects.create_user("cms-ddm")
    membership_grant(user=user, role="ddm", experiment=Experiment.objects.get(name="CMS"))
    client.force_login(user)
    rows = client.get("/results/tc/", {"format": "json"}).json()["rows"]
    assert [row["experiment"] for row in rows] == ["CMS"]
    atlas_target = world["targets"]["atlas-cnaf"]
    assert client.get(f"/results/tc/targets/{atlas_target.pk}/").status_code == 404


def test_an_unknown_challenge_is_not_found(world: dict[str, Any], viewer: Client) -> None:
    assert viewer.get("/results/nope/").status_code == 404


# --- one target over time -------------------------------------------------------------------------------------


def test_the_target_page_plots_the_target_line_and_the_stable_band(world: dict[str, Any], viewer: Client) -> None:
    target = world["targets"]["atlas-cnaf"]
    content = viewer.get(f"/results/tc/targets/{target.pk}/").content.decode()
    figure = json_script(content, "rate-figure")
    line = next(trace for trace in figure["data"] if trace["name"] == "target")
    assert (line["x"], line["y"]) == ([iso(at(0)), iso(at(600))], [1.0, 1.0])
    band = next(shape for shape in figure["layout"]["shapes"] if shape["name"] == "stable window")
    assert (band["x0"], band["x1"]) == (iso(at(0)), iso(at(300)))  # a flat rate: the first 5 h window
    assert "10-minute means" in figure["data"][0]["name"]  # a 10 h activity is drawn in 10-minute bins
    assert json_script(content, "histogram-figure")["data"][0]["type"] == "histogram"
    assert "/challenges/plotly.min.js?v=" in content


def test_the_target_page_shows_the_statistics_of_the_throughput_samples(world: dict[str, Any], viewer: Client) -> None:
    plan = world["plan"]
    target = plan.target("ATLAS", "steps", start=1000, end=1180, rate=2 * GB, place="PIC")
    records_store(
        records=[
            plan.moved("ATLAS", "CERN->PIC", start=1000 + 60 * step, end=1060 + 60 * step, rate=(step + 1) * GB)
            for step in range(3)
        ]
    )
    content = viewer.get(f"/results/tc/targets/{target.pk}/", {"bin": "60"}).content.decode()
    assert 'aria-label="Statistics of the throughput samples"' in content
    assert re.search(r"3 samples \(60-minute means with traffic; \d+ idle bins? left out\)", content)
    assert re.search(r"min</th><td class=\"num\">1 GB/s", content)
    assert re.search(r"mean</th><td class=\"num\">2 GB/s", content)
    assert re.search(r"max</th><td class=\"num\">3 GB/s", content)
    assert re.search(r"standard deviation</th><td class=\"num\">816 MB/s", content)  # sqrt(2/3)


def test_the_target_series_exports_its_bins(world: dict[str, Any], viewer: Client) -> None:
    target = world["targets"]["cms-cnaf"]
    exported = viewer.get(f"/results/tc/targets/{target.pk}/", {"format": "json", "bin": "10"}).json()
    assert exported["columns"] == ["start", "end", "rate"]
    assert len(exported["rows"]) == 6
    assert exported["rows"][0] == {"start": iso(at(0)), "end": iso(at(10)), "rate": pytest.approx(1e9)}


def test_a_target_of_another_challenge_is_not_found(world: dict[str, Any], viewer: Client) -> None:
    target = world["targets"]["before-atlas-cnaf"]
    assert viewer.get(f"/results/tc/targets/{target.pk}/").status_code == 404


# --- compare --------------------------------------------------------------------------------------------------


def test_compare_matches_rows_and_gives_the_ratio_of_stable_or_average_rates(
    world: dict[str, Any], viewer: Client
) -> None:
    rows = viewer.get("/results/tc/compare/", {"format": "json"}).json()["rows"]
    by_key = {(row["experiment"], row.get("site"), str(row.get("link"))): row for row in rows}
    atlas = by_key[("ATLAS", "CNAF", "None")]
    assert (atlas["current"]["activity"], atlas["earlier"]["activity"]) == ("atlas-dt", "atlas-21")
    assert (atlas["ratio"], atlas["ratio_basis"]) == (pytest.approx(1.5 / 0.75), "stable")
    cms = by_key[("CMS", "CNAF", "None")]
    assert (cms["ratio"], cms["ratio_basis"]) == (pytest.approx(1 / 0.25), "average")  # 1 h: no stable rate


def test_compare_keeps_unmatched_rows_on_their_own_side(world: dict[str, Any], viewer: Client) -> None:
    rows = viewer.get("/results/tc/compare/", {"format": "json"}).json()["rows"]
    link = next(row for row in rows if row.get("link"))
    assert link["earlier"] is None and link["ratio"] is None and link["current"]["activity"] == "atlas-dt"
    pic = next(row for row in rows if row.get("site") == "PIC")
    assert pic["current"] is None and pic["earlier"]["activity"] == "atlas-21"
    assert len(rows) == 4


def test_compare_page_shows_both_sides_and_the_ratio(world: dict[str, Any], viewer: Client) -> None:
    content = viewer.get("/results/tc/compare/").content.decode()
    atlas = row_with(content, "atlas-21</a>", "<td>CNAF</td>", "ATLAS")
    assert "1.5 GB/s" in atlas and "0.75 GB/s" in atlas and "2.00\N{MULTIPLICATION SIGN}" in atlas
    assert "no match in DC21" in row_with(content, "CERN → PIC")
    assert "no match in TC22" in row_with(content, "<td>PIC</td>")


def test_compare_csv_puts_both_sides_in_one_row(world: dict[str, Any], viewer: Client) -> None:
    response = viewer.get("/results/tc/compare/", {"format": "csv", "experiment": "CMS"})
    (row,) = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert (row["current_activity"], row["earlier_activity"]) == ("cms-dt", "cms-21")
    assert float(row["current_average_rate"]) == pytest.approx(1e9)
    assert float(row["earlier_average_rate"]) == pytest.approx(0.25e9)
    assert (float(row["ratio"]), row["ratio_basis"]) == (pytest.approx(4.0), "average")


def test_compare_without_an_earlier_challenge_is_not_found(world: dict[str, Any], viewer: Client) -> None:
    assert viewer.get("/results/dc21/compare/").status_code == 404


# --- site reports beside the rows, and their outages on the plot ----------------------------------------------


def _report(world: dict[str, Any], site: str, *, status: str = "submitted", outages: int = 0) -> Any:
    from reports.models import Outage, SiteReport

    report = SiteReport.objects.create(challenge=world["challenge"], site=Site.objects.get(name=site), status=status)
    for index in range(outages):
        Outage.objects.create(
            report=report, start=at(60 + 120 * index), end=at(90 + 120 * index), reason=f"pool reboot {index}"
        )
    return report


def test_the_table_marks_a_sites_rows_with_its_report_and_outage_count(world: dict[str, Any], viewer: Client) -> None:
    report = _report(world, "CNAF", outages=2)
    content = viewer.get("/results/tc/").content.decode()
    for experiment in ("ATLAS", "CMS"):
        row = row_with(content, f"{experiment}</td>", "CNAF")
        assert f'class="report-marker status-submitted" href="/reports/tc/{report.pk}/"' in row
        assert "report · 2 outages</a>" in row
    assert "report-marker" not in row_with(content, "CERN → PIC")
    assert 'href="/reports/tc/">Site reports (1)</a>' in content


def test_a_link_row_carries_the_reports_of_both_its_ends(world: dict[str, Any], viewer: Client) -> None:
    cern, pic = _report(world, "CERN"), _report(world, "PIC", outages=1)
    row = row_with(viewer.get("/results/tc/").content.decode(), "CERN → PIC")
    assert f'href="/reports/tc/{cern.pk}/"' in row and f'href="/reports/tc/{pic.pk}/"' in row
    assert "report · 1 outage</a>" in row


def test_another_sites_draft_puts_no_marker_on_the_table(world: dict[str, Any], viewer: Client) -> None:
    _report(world, "CNAF", status="draft", outages=1)
    assert "report-marker" not in viewer.get("/results/tc/").content.decode()


def test_the_matrix_marks_the_sites_with_a_report(world: dict[str, Any], viewer: Client) -> None:
    report = _report(world, "CNAF", outages=1)
    content = viewer.get("/results/tc/matrix/").content.decode()
    header = re.search(r'<th scope="col">CNAF.*?</th>', content, re.S)
    assert header and f'href="/reports/tc/{report.pk}/"' in header.group(0)
    assert "1 outage" in header.group(0)
    row_header = re.search(r'<th scope="row">CERN.*?</th>', content, re.S)
    assert row_header and "report-marker" not in row_header.group(0)


def test_the_target_plot_shades_the_outages_of_its_site_with_the_reason(world: dict[str, Any], viewer: Client) -> None:
    _report(world, "CNAF", outages=1)
    _report(world, "PIC", outages=1)  # another site: not on CNAF's plot
    target = world["targets"]["atlas-cnaf"]
    content = viewer.get(f"/results/tc/targets/{target.pk}/").content.decode()
    figure = json_script(content, "rate-figure")
    outages = [shape for shape in figure["layout"]["shapes"] if shape.get("name", "").startswith("outage")]
    assert [(s["name"], s["x0"], s["x1"]) for s in outages] == [
        ("outage: pool reboot 0", "2022-03-14T01:00:00Z", "2022-03-14T01:30:00Z")
    ]
    hover = next(trace for trace in figure["data"] if trace["name"] == "outage")
    assert hover["text"][0] == "CNAF outage 2022-03-14 01:00 → 2022-03-14 01:30 UTC: pool reboot 0"
    assert "CNAF outage 2022-03-14 01:00 → 2022-03-14 01:30 UTC: pool reboot 0" in html.unescape(content)


def test_the_histogram_and_its_statistics_leave_the_idle_bins_out(world: dict[str, Any], viewer: Client) -> None:
    plan = world["plan"]
    target = plan.target("ATLAS", "gaps", start=1000, end=1180, rate=2 * GB, place="PIC")
    records_store(
        records=[
            plan.moved("ATLAS", "CERN->PIC", start=1000 + 60 * step, end=1060 + 60 * step, rate=(step + 1) * GB)
            for step in (0, 2)  # the hour in between moved nothing
        ]
    )
    content = viewer.get(f"/results/tc/targets/{target.pk}/", {"bin": "60"}).content.decode()
    assert "2 samples (60-minute means with traffic; 1 idle bin left out)" in content
    assert re.search(r"min</th><td class=\"num\">1 GB/s", content)  # not 0
    histogram = json_script(content, "histogram-figure")["data"][0]
    assert sorted(histogram["x"]) == [1.0, 3.0]
