"""One number, one definition: every surface of a target says the same thing about it, at a fixed clock, while its
window runs and after it has ended, for a transfer link, a site in and out, a network target measured by iperf3 and a
recall target.

Surfaces read: the rates API, the results table's CSV and JSON exports, the results table (HTML), the target's page,
the now board's API and page, the link panel's API and the alerts' texts."""

from __future__ import annotations

import csv
import html
import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine
from django.test import Client
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from common.units import rate_text
from live.alerts import alerts_evaluate
from live.models import Alert
from results.models import TransferRecord
from results.services import network_measurement_store, records_store
from runs.models import Run
from sites.models import Experiment, NetworkHost, Site
from sites.roles import membership_grant
from sites.tokens import token_issue
from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 16, tzinfo=UTC)  # the challenge's Monday
WINDOW = (START + timedelta(days=1), START + timedelta(days=4))  # every activity's window
MIDWEEK = START + timedelta(days=2, hours=12, seconds=30)  # the clock inside the windows (board minute 12:00)
AFTER = START + timedelta(days=5, hours=3)
MB = 10**6
FIGURES = (
    "volume", "average_rate", "max_rate", "stable_rate", "last_15min_rate", "last_hour_rate", "required_rate",
    "projected_average_rate", "files_ok", "files_failed", "verdict", "window_ended", "measured_by",
)  # fmt: skip


@dataclass
class World:
    challenge: Challenge
    link: Target  # T0 -> T1, ATLAS export
    site_in: Target  # into T1
    site_out: Target  # out of T0
    network: Target  # CMS iperf3 baseline, into T1
    recall: Target  # CMS A-DT, out of TAPE


def _record(  # noqa: PLR0917 (a record's fields, in the order they read)
    experiment: Experiment, source: Site, destination: Site | None, start: datetime, minutes: int,
    rate: float, number: int, state: str = "ok",
) -> TransferRecord:  # fmt: skip
    return TransferRecord(
        experiment=experiment,
        source_site=source,
        destination_site=destination,
        bytes=int(rate * minutes * 60) if state == "ok" else 0,
        start=start,
        end=start + timedelta(minutes=minutes),
        state=state,
        mode="stage" if destination is None else "pull",
        origin="fts",
        origin_id=f"truth-{number}",
    )


def world_make() -> World:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    t0, t1, tape = (Site.objects.create(name=name, tier=tier) for name, tier in (("T0", 0), ("T1", 1), ("TAPE", 1)))
    NetworkHost.objects.create(site=t1, address="iperf.t1.example.org:5201")
    challenge = Challenge.objects.create(
        name="One truth", slug="truth", start=START, end=START + timedelta(days=7), max_window=3600, stable_window=7200
    )

    def activity(name: str, experiment: Experiment, kind: str, mode: str, source: Site | None = None) -> Activity:
        return Activity.objects.create(
            challenge=challenge, name=name, experiment=experiment, kind=kind, mode=mode, start=WINDOW[0], end=WINDOW[1],
            source=source,
        )  # fmt: skip

    export = activity("ATLAS export", atlas, "transfer", "T0", source=t0)
    baseline = activity("iperf3 baseline", cms, "network", "network")
    recall = activity("CMS recall", cms, "staging", "A-DT")
    world = World(
        challenge=challenge,
        link=Target.objects.create(activity=export, link_from=t0, link_to=t1, rate=2 * MB),
        site_in=Target.objects.create(activity=export, site=t1, direction="in", rate=1 * MB),
        site_out=Target.objects.create(activity=export, site=t0, direction="out", rate=50 * MB),
        network=Target.objects.create(activity=baseline, site=t1, direction="in", rate=1e9),
        recall=Target.objects.create(activity=recall, site=tape, direction="out", rate=0.9 * MB),
    )
    board = MIDWEEK.replace(second=0)
    # ATLAS T0 -> T1: 1.5 MB/s for 3 h, then 0.5 MB/s for the last 30 minutes; one failed file.
    records = [_record(atlas, t0, t1, board - timedelta(hours=3, minutes=30) + timedelta(minutes=10 * i), 10, 1.5 * MB,
                       i) for i in range(18)]  # fmt: skip
    records += [_record(atlas, t0, t1, board - timedelta(minutes=30) + timedelta(minutes=10 * i), 10, 0.5 * MB, 100 + i)
                for i in range(3)]  # fmt: skip
    records.append(_record(atlas, t0, t1, board - timedelta(minutes=50), 5, 0, 200, state="failed"))
    # CMS recall out of TAPE: 20 files of 1 MB/s over 5 minutes each, the last ending 20 minutes before the board.
    records += [_record(cms, tape, None, board - timedelta(hours=2) + timedelta(minutes=5 * i), 5, 1 * MB, 300 + i)
                for i in range(20)]  # fmt: skip
    records_store(records=records)
    for number, (rate, ended) in enumerate(((2.8e9, board - timedelta(hours=3)), (2.1e9, board - timedelta(hours=1)))):
        run = Run.objects.create(activity=baseline, kind="network", state="finished", started_at=ended)
        network_measurement_store(
            run_id=run.pk,
            activity_id=baseline.pk,
            experiment_id=cms.pk,
            host="iperf.t1.example.org",
            port=5201,
            rate=rate,
            start=ended - timedelta(seconds=10 + number),
            end=ended,
        )
    return world


@pytest.fixture
def world() -> World:
    return world_make()


@pytest.fixture
def coordinator() -> tuple[Client, APIClient]:
    user = UserFactory(username="truth-coordinator")
    membership_grant(user=user, role="coordinator")
    page = Client()
    page.force_login(user)
    _, key = token_issue(username="truth-coordinator", role="coordinator")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return page, api


def _same(value: Any, other: Any) -> bool:
    if isinstance(value, float) or isinstance(other, float):
        return value is not None and other is not None and float(other) == pytest.approx(float(value), rel=1e-9)
    return bool(value == other)


def _csv_value(text: str) -> Any:
    if text == "":
        return None
    if text in ("True", "False", "true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _row_html(page: str, url: str) -> str:
    """The table row that links to `url`."""
    for row in re.findall(r"<tr>.*?</tr>", page, flags=re.S):
        if f'href="{url}"' in row:
            return html.unescape(row)
    raise AssertionError(f"no row links to {url}")


def surfaces(world: World, page: Client, api: APIClient) -> dict[str, dict[int, dict[str, Any]]]:
    """Every target's figures as each surface gives them, by target id."""
    slug = world.challenge.slug
    found: dict[str, dict[int, dict[str, Any]]] = {}
    found["rates API"] = {row["id"]: row for row in api.get(f"/api/v1/challenges/{slug}/rates/").json()["rows"]}
    found["JSON export"] = {row["id"]: row for row in page.get(f"/results/{slug}/", {"format": "json"}).json()["rows"]}
    text = page.get(f"/results/{slug}/", {"format": "csv"}).content.decode()
    found["CSV export"] = {
        int(row["id"]): {key: _csv_value(value) for key, value in row.items()}
        for row in csv.DictReader(io.StringIO(text))
    }
    found["now API"] = {row["id"]: row for row in api.get(f"/api/v1/challenges/{slug}/now/").json()["targets"]}
    return found


def check_agreement(world: World, page: Client, api: APIClient) -> dict[int, dict[str, Any]]:
    found = surfaces(world, page, api)
    reference = found["rates API"]
    assert set(reference) == {t.pk for t in (world.link, world.site_in, world.site_out, world.network, world.recall)}
    for surface, rows in found.items():
        assert set(rows) == set(reference), surface
        for pk, row in rows.items():
            for name in FIGURES:
                assert _same(reference[pk][name], row[name]), (surface, pk, name, reference[pk][name], row[name])
            assert row["url"] == reference[pk]["url"] == f"/results/truth/targets/{pk}/", surface
            if surface != "CSV export":  # the CSV flattens it: network_latest_rate, network_best_rate, ...
                assert row["network"] == reference[pk]["network"], (surface, pk)
            elif reference[pk]["network"]:
                best = reference[pk]["network"]["best"]
                assert _same(best["rate"], row["network_best_rate"]), pk
    table = page.get(f"/results/{world.challenge.slug}/").content.decode()
    board = page.get(f"/challenges/{world.challenge.slug}/now/").content.decode()
    for pk, row in reference.items():
        for name, content in (("table", _row_html(table, row["url"])), ("now page", _row_html(board, row["url"]))):
            assert row["verdict"] in content, (name, pk, row["verdict"])
        assert rate_text(row["average_rate"]) in _row_html(table, row["url"]), (pk, rate_text(row["average_rate"]))
        target_page = html.unescape(page.get(row["url"]).content.decode())
        assert f"verdict {row['verdict']}" in re.sub(r"<[^>]+>", "", target_page), pk
        assert rate_text(row["average_rate"]) in target_page, pk
    return reference


def test_every_surface_gives_the_same_figures_while_the_windows_run(
    world: World, coordinator: tuple[Client, APIClient]
) -> None:
    page, api = coordinator
    with time_machine.travel(MIDWEEK, tick=False):
        rows = check_agreement(world, page, api)
        links = api.get(f"/api/v1/challenges/{world.challenge.slug}/links/").json()["links"]
        on_link = {target["id"]: target for link in links for target in link["targets"]}
        for pk in (world.link.pk, world.site_in.pk):
            for name in ("average_rate", "last_15min_rate", "last_hour_rate", "verdict"):
                assert _same(rows[pk][name], on_link[pk][name]), ("link panel", pk, name)
        summary = alerts_evaluate(challenge=world.challenge)
    link = rows[world.link.pk]
    assert (link["window_ended"], link["volume"]) == (False, pytest.approx((18 * 1.5 + 3 * 0.5) * 600 * MB))
    assert link["average_rate"] == pytest.approx(link["volume"] / (36 * 3600))  # so far: 1.5 days of the window
    assert link["last_15min_rate"] == pytest.approx(0.5 * MB) and link["verdict"] == "will miss"
    assert rows[world.network.pk]["verdict"] == "met" and rows[world.network.pk]["max_rate"] == pytest.approx(2.8e9)
    assert rows[world.network.pk]["network"]["latest"]["rate"] == pytest.approx(2.1e9)
    assert rows[world.recall.pk]["volume"] == pytest.approx(20 * 300 * MB)
    # The alerts say what the figures say: the link's text carries its projected and required rates; none for the
    # network target, which its measurement has met.
    opened = {alert.target_id: alert for alert in summary.opened if alert.kind == "target_at_risk"}
    assert world.network.pk not in opened
    assert rate_text(link["projected_average_rate"]) in opened[world.link.pk].message
    assert rate_text(link["required_rate"]) in opened[world.link.pk].message


def test_every_surface_gives_the_same_final_figures_after_the_windows(
    world: World, coordinator: tuple[Client, APIClient]
) -> None:
    page, api = coordinator
    with time_machine.travel(AFTER, tick=False):
        rows = check_agreement(world, page, api)
        alerts_evaluate(challenge=world.challenge)
    assert all(row["window_ended"] for row in rows.values())
    assert rows[world.link.pk]["average_rate"] == pytest.approx(rows[world.link.pk]["volume"] / (3 * 86400))
    assert rows[world.link.pk]["verdict"] == "missed" and rows[world.site_in.pk]["verdict"] == "met"
    # The recall: 1 MB/s for 100 minutes: its best hour reaches 0.9 MB/s, its best two hours (0.83 MB/s) do not.
    assert rows[world.network.pk]["verdict"] == "met" and rows[world.recall.pk]["verdict"] == "partly"
    assert not Alert.objects.filter(challenge=world.challenge, state="open").exists()
