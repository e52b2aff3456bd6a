"""/metrics: Prometheus's text format for operators, behind a bearer token or an address allow-list, every figure
read from the database (or the consumer's status in the cache) when scraped, in a bounded number of queries."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from ingest.consumer import consumer_status_write
from portal import metrics
from results.ingest_counts import ingest_counts_add
from results.models import TransferRecord
from runs.models import Run, RunFile
from sites.agents import agent_enroll, agent_revoke
from sites.models import Site
from tests.challenges.factories import ActivityFactory
from tests.live.deliveries import alert_make

pytestmark = pytest.mark.django_db

TOKEN = "scrape-secret-0123456789"


def samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def scrape(client: Client, **headers: Any) -> Any:
    return client.get("/metrics", **headers)


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_IPS=[])
def test_with_neither_a_token_nor_an_allow_list_nobody_may_scrape(client: Client) -> None:
    response = scrape(client, HTTP_AUTHORIZATION="Bearer anything")
    assert response.status_code == 403 and b"METRICS_TOKEN" in response.content


@override_settings(METRICS_TOKEN=TOKEN, METRICS_ALLOWED_IPS=[])
def test_the_bearer_token_opens_it_and_a_wrong_one_does_not(client: Client) -> None:
    assert scrape(client).status_code == 401
    wrong = scrape(client, HTTP_AUTHORIZATION="Bearer not-the-token")
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"].startswith("Bearer")
    assert scrape(client, HTTP_AUTHORIZATION=f"Token {TOKEN}").status_code == 401  # the portal's API tokens: no
    right = scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert right.status_code == 200 and right["Content-Type"].startswith("text/plain; version=")
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@override_settings(METRICS_TOKEN="", METRICS_ALLOWED_IPS=["10.1.0.0/16", "192.0.2.7"])
def test_an_allowed_address_may_scrape_without_a_token(client: Client) -> None:
    assert scrape(client, REMOTE_ADDR="10.1.2.3").status_code == 200
    assert scrape(client, REMOTE_ADDR="192.0.2.7").status_code == 200
    assert scrape(client, REMOTE_ADDR="10.2.0.1").status_code == 401
    assert scrape(client).status_code == 401  # the test client's 127.0.0.1 is not on the list


@override_settings(METRICS_TOKEN=TOKEN)
def test_the_figures_are_the_databases_at_scrape_time(client: Client, django_assert_max_num_queries: Any) -> None:
    activity: Any = ActivityFactory()
    for state, count in (("running", 2), ("finished", 3), ("failed", 1)):
        for _ in range(count):
            Run.objects.create(activity=activity, kind="transfer", state=state)
    Run.objects.create(activity=activity, kind="network", state="queued")
    running = Run.objects.filter(state="running").earliest("pk")
    for index, state in enumerate(["running", "running", "running", "queued", "done"]):
        RunFile.objects.create(
            run=running, index=index, source_url="root://a//f", destination_url=f"root://b//{index}", state=state
        )
    now = timezone.now()
    for index, (origin, ended) in enumerate([("fts", 5), ("fts", 50), ("rucio", 10), ("fts", 120), ("probe", 1)]):
        TransferRecord.objects.create(
            start=now - timedelta(minutes=ended + 1),
            end=now - timedelta(minutes=ended),
            bytes=1,
            state="ok",
            origin=origin,
            origin_id=f"m-{index}",
        )
    alert_make(kind="throughput_drop")
    alert_make(kind="throughput_drop", subject="link:3-4")
    alert_make(kind="source_silent", subject="source:fts")
    alert_make(kind="no_traffic", state="resolved")
    consumer_status_write(
        format="fts", destination="/topic/transfer.fts_monitoring_complete", lag_seconds=4.5, waiting=0
    )

    ingest_counts_add(format="fts", accepted=7, duplicates=2, skipped=0, rejected=3)
    ingest_counts_add(format="fts", accepted=1, duplicates=0, skipped=0, rejected=1)

    # Per part a transaction (a savepoint here, in the test's), its timeout, its release, and one read for each part
    # but the STOMP part, which reads the cache (runs, files, ingest, ingest totals, alerts, agents).
    with django_assert_max_num_queries(len(metrics.COLLECTORS) * 4 - 1):
        body = scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content
    got = samples(body)
    assert got[("portal_runs", (("kind", "transfer"), ("state", "running")))] == 2
    assert got[("portal_runs", (("kind", "transfer"), ("state", "finished")))] == 3
    assert got[("portal_runs", (("kind", "transfer"), ("state", "cancelled")))] == 0  # every state, even at 0
    assert got[("portal_runs", (("kind", "network"), ("state", "queued")))] == 1
    assert got[("portal_run_files_in_flight", ())] == 3
    assert got[("portal_ingest_records_last_hour", (("origin", "fts"),))] == 2  # not the one of 2 hours ago
    assert got[("portal_ingest_records_last_hour", (("origin", "rucio"),))] == 1
    assert got[("portal_ingest_records_last_hour", (("origin", "perfsonar"),))] == 0
    assert got[("portal_ingest_messages_total", (("format", "fts"), ("outcome", "accepted")))] == 8
    assert got[("portal_ingest_messages_total", (("format", "fts"), ("outcome", "rejected")))] == 4
    assert got[("portal_ingest_messages_total", (("format", "fts"), ("outcome", "duplicates")))] == 2
    assert ("portal_ingest_messages_total", (("format", "rucio"), ("outcome", "rejected"))) not in got  # none sent
    assert got[("portal_alerts_open", (("kind", "throughput_drop"),))] == 2
    assert got[("portal_alerts_open", (("kind", "source_silent"),))] == 1
    assert got[("portal_alerts_open", (("kind", "no_traffic"),))] == 0
    assert got[("portal_stomp_lag_seconds", (("format", "fts"),))] == 4.5
    assert got[("portal_stomp_consumer_up", (("format", "rucio"),))] == 0
    assert ("portal_stomp_lag_seconds", (("format", "rucio"),)) not in got  # no consumer: no figure, not a 0
    assert all(value == 1 for (name, _), value in got.items() if name == "portal_metrics_collector_up")


@override_settings(METRICS_TOKEN=TOKEN)
def test_a_part_that_fails_says_so_and_the_others_are_still_read(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> Any:
        raise RuntimeError("statement timeout")

    monkeypatch.setitem(metrics.COLLECTORS, "alerts", broken)
    response = scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    got = samples(response.content)
    assert got[("portal_metrics_collector_up", (("part", "alerts"),))] == 0
    assert got[("portal_metrics_collector_up", (("part", "runs"),))] == 1
    assert ("portal_run_files_in_flight", ()) in got


def agent_beat(key: str, in_flight: list[dict[str, int]]) -> None:
    """The agent's own heartbeat through the agents' API, as `python -m agent` sends it."""
    body = {"version": "1.4", "kinds": ["transfer", "network"], "in_flight": in_flight}
    response = Client().post(
        "/api/v1/agent/heartbeat/", body, content_type="application/json", HTTP_AUTHORIZATION=f"Agent {key}"
    )
    assert response.status_code == 200, response.content


@override_settings(METRICS_TOKEN=TOKEN)
def test_each_agent_says_when_it_last_called_its_jobs_in_flight_and_whether_it_is_enrolled(client: Client) -> None:
    beating_site, quiet_site, gone_site = (
        Site.objects.create(name=name, tier=1, country="IT") for name in ("TB-T0", "TB-T1-B", "TB-T2")
    )
    key = agent_enroll(site=beating_site, name="host-2")[1]
    quiet, _ = agent_enroll(site=quiet_site)
    gone, _ = agent_enroll(site=gone_site)
    before = timezone.now()
    agent_beat(key, [{"id": 901, "bytes": 10}, {"id": 902, "bytes": 0}])  # two jobs the portal does not know: counted
    after = timezone.now()
    type(quiet).objects.filter(pk=quiet.pk).update(created=after - timedelta(minutes=7))  # enrolled, never called
    agent_revoke(agent=gone)

    got = samples(scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content)
    t0 = (("agent", "host-2"), ("site", "TB-T0"))
    never = (("agent", "agent"), ("site", "TB-T1-B"))
    revoked = (("agent", "agent"), ("site", "TB-T2"))
    assert before.timestamp() <= got[("portal_agent_last_seen_timestamp_seconds", t0)] <= after.timestamp()
    assert 0 <= got[("portal_agent_seconds_since_seen", t0)] < 60
    assert got[("portal_agent_jobs_in_flight", t0)] == 2
    assert got[("portal_agent_enrolled", t0)] == 1
    assert ("portal_agent_last_seen_timestamp_seconds", never) not in got  # it never called: no time, not 1970
    assert 7 * 60 <= got[("portal_agent_seconds_since_seen", never)] < 8 * 60  # silent since its enrolment
    assert got[("portal_agent_jobs_in_flight", never)] == 0
    assert got[("portal_agent_enrolled", revoked)] == 0
    assert ("portal_agent_seconds_since_seen", revoked) not in got  # a revoked agent is not a silent one
    assert got[("portal_metrics_collector_up", (("part", "agents"),))] == 1
