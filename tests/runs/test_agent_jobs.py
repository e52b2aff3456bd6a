"""The portal's side of a site's agent, through its API: a site with an agent gets its runs as jobs for it (no
Celery message), the agent takes them by long poll, beats, and reports each result once; another site's job is
refused and logged; a lost agent's file is tried once more, as a lost worker's."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import transaction
from django.test import Client
from django.utils import timezone

from measure.outcomes import FileOutcome
from results.models import NetworkMeasurement, TransferRecord
from runs import engine, reaper
from runs.jobs import REAPER_PASS_KEY
from runs.models import AgentJob, Run, RunFile
from runs.services import run_start
from sites.agents import agent_enroll
from sites.models import Site
from sites.roles import membership_grant
from tests.sites.factories import SiteFactory, UserFactory

pytestmark = pytest.mark.django_db


class AgentClient:
    def __init__(self, site: Site) -> None:
        self.agent, key = agent_enroll(site=site)
        self.client = Client(HTTP_AUTHORIZATION=f"Agent {key}")

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self.client.post(f"/api/v1/agent/{path}", body, content_type="application/json")

    def claim(self, most: int = 8, wait: float = 0) -> list[dict[str, Any]]:
        response = self.post("jobs/claim/", {"most": most, "wait": wait})
        assert response.status_code == 200, response.content
        return response.json()["jobs"]


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coordinator")
    membership_grant(user=user, role="coordinator")
    return user


def network_run(user: Any, site: Site, capture: Any) -> Run:
    with capture(execute=True):
        return run_start(
            user=user, kind="network", parameters={"host": "127.0.0.1", "port": 5201, "duration": 1}, site=site
        )


NETWORK_RESULT = {"outcomes": [], "summary": {"rate": 1.25e9, "host": "127.0.0.1", "port": 5201}, "error": ""}


def test_a_run_of_a_site_with_an_agent_is_a_job_its_agent_takes_and_the_run_names_the_agent(
    coordinator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    site = SiteFactory(name="TB-T1-A")
    agent = AgentClient(site)
    run = network_run(coordinator, site, django_capture_on_commit_callbacks)

    (job,) = agent.claim()

    run.refresh_from_db()
    assert run.parameters["queue"] == "agent.TB-T1-A"
    assert (job["kind"], job["probe"], job["run"], job["parameters"]["host"]) == (
        "probe",
        "network",
        run.pk,
        "127.0.0.1",
    )
    assert (run.state, run.agent) == ("running", agent.agent)
    assert agent.claim() == []  # taken once
    reader = Client()
    reader.force_login(coordinator)
    assert reader.get(f"/api/v1/runs/{run.pk}/").json()["agent"] == {"site": "TB-T1-A", "name": "agent"}
    assert "measured at TB-T1-A by its agent" in reader.get(f"/challenges/runs/{run.pk}/").content.decode()


def test_a_result_delivered_twice_is_stored_once(coordinator: Any, django_capture_on_commit_callbacks: Any) -> None:
    site = SiteFactory(name="TB-T1-A")
    agent = AgentClient(site)
    run = network_run(coordinator, site, django_capture_on_commit_callbacks)
    (job,) = agent.claim()

    answers = [agent.post(f"jobs/{job['id']}/result/", {**NETWORK_RESULT, "attempt": job["attempt"]}) for _ in "12"]

    assert [(a.status_code, a.json()["stored"]) for a in answers] == [(200, True), (200, False)]
    run.refresh_from_db()
    assert (run.state, run.summary["rate"]) == ("finished", 1.25e9)
    assert NetworkMeasurement.objects.filter(run=run).count() == 1


def test_a_result_for_another_sites_run_is_refused_and_logged(
    coordinator: Any, django_capture_on_commit_callbacks: Any, caplog: Any
) -> None:
    theirs, mine = SiteFactory(name="TB-T1-A"), SiteFactory(name="TB-T1-B")
    their_agent, my_agent = AgentClient(theirs), AgentClient(mine)
    run = network_run(coordinator, theirs, django_capture_on_commit_callbacks)
    (job,) = their_agent.claim()
    assert my_agent.claim() == []  # never offered another site's work

    with caplog.at_level(logging.WARNING, logger="sites.roles"):
        answer = my_agent.post(f"jobs/{job['id']}/result/", {**NETWORK_RESULT, "attempt": job["attempt"]})

    assert answer.status_code == 403 and "not your site's work" in answer.json()["detail"]
    assert any("refused agent job" in record.getMessage() for record in caplog.records)
    run.refresh_from_db()
    assert (run.state, run.summary) == ("running", {})
    assert AgentJob.objects.get().state == "claimed"


def test_the_heartbeat_keeps_a_probe_alive_and_says_to_stop_when_its_run_ended(
    coordinator: Any, django_capture_on_commit_callbacks: Any
) -> None:
    site = SiteFactory(name="TB-T1-A")
    agent = AgentClient(site)
    run = network_run(coordinator, site, django_capture_on_commit_callbacks)
    (job,) = agent.claim()
    Run.objects.filter(pk=run.pk).update(heartbeat=timezone.now() - timedelta(minutes=5))

    beat = agent.post("heartbeat/", {"version": "1.0", "kinds": ["network"], "in_flight": [{"id": job["id"]}]})
    assert beat.status_code == 200 and beat.json() == {"stop": []}
    run.refresh_from_db()
    assert timezone.now() - run.heartbeat < timedelta(seconds=5)
    agent.agent.refresh_from_db()
    assert (agent.agent.version, agent.agent.kinds, agent.agent.in_flight) == ("1.0", ["network"], 1)

    Run.objects.filter(pk=run.pk).update(state="cancelled")
    beat = agent.post("heartbeat/", {"version": "1.0", "kinds": ["network"], "in_flight": [{"id": job["id"]}]})
    assert beat.json() == {"stop": [job["id"]]}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("jobs/claim/", {"most": 0}),
        ("jobs/claim/", {"wait": 3600}),
        ("heartbeat/", {"version": "1.0", "kinds": ["nonsense"], "in_flight": []}),
        ("heartbeat/", {"version": "1.0", "kinds": [], "in_flight": [{"id": "x"}]}),
        ("jobs/1/result/", {"attempt": -1}),
    ],
)
def test_bad_input_from_an_agent_is_a_400_naming_the_field(path: str, body: dict[str, Any]) -> None:
    agent = AgentClient(SiteFactory(name="TB-T1-A"))
    answer = agent.post(path, body)
    assert answer.status_code == 400 and set(answer.json()) & set(body)


def transfer_run_of(site: Site, capture: Any) -> tuple[Run, RunFile]:
    queue = f"agent.{site.name}"
    run = Run.objects.create(kind="transfer", state="running", parameters={"queue": queue, "concurrency": 1})
    file = RunFile.objects.create(
        run=run, index=0, source_url="root://a//f", destination_url="root://b//g", size=10, queue=queue
    )
    with capture(execute=True), transaction.atomic():
        engine.run_top_up(Run.objects.select_for_update().get(pk=run.pk))
    return run, file


def test_an_outcome_that_is_not_one_is_a_400_and_changes_nothing(django_capture_on_commit_callbacks: Any) -> None:
    site = SiteFactory(name="TB-T1-A")
    agent = AgentClient(site)
    _, file = transfer_run_of(site, django_capture_on_commit_callbacks)
    (job,) = agent.claim()

    answer = agent.post(f"jobs/{job['id']}/result/", {"attempt": 1, "outcome": {"source_url": "x"}})

    assert answer.status_code == 400 and "outcome" in answer.json()
    file.refresh_from_db()
    assert file.state == "running" and AgentJob.objects.get().state == "claimed"


def test_a_file_whose_agent_stopped_beating_is_tried_once_more_and_the_late_result_is_dropped(
    django_capture_on_commit_callbacks: Any,
) -> None:
    site = SiteFactory(name="TB-T1-A")
    agent = AgentClient(site)
    run, file = transfer_run_of(site, django_capture_on_commit_callbacks)
    (first,) = agent.claim()
    assert (first["kind"], first["file"], first["attempt"]) == ("transfer", file.pk, 1)

    later = timezone.now() + timedelta(minutes=5)
    cache.delete(REAPER_PASS_KEY)
    with django_capture_on_commit_callbacks(execute=True):
        spared = reaper.runs_reap(now=later, broker_lost=False)  # the reaper's first pass in minutes: the portal
        summary = reaper.runs_reap(now=later, broker_lost=False)  # was away, its agents unheard; the next judges
    assert (spared.files_retried, summary.files_retried) == (0, 1)
    (second,) = agent.claim()
    assert (second["file"], second["attempt"]) == (file.pk, 2)

    now = timezone.now()
    late = FileOutcome("root://a//f", "root://b//g", 10, now, now, True).to_dict()
    answer = agent.post(f"jobs/{first['id']}/result/", {"attempt": 1, "outcome": late})
    assert answer.status_code == 200 and answer.json() == {"stored": False}
    records = list(TransferRecord.objects.filter(run=run).values_list("state", "attempt"))
    assert records == [("failed", 1)]  # the lost try's record, from the reaper; the late result adds none
