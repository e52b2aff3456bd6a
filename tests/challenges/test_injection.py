"""Rucio load injection plans from the clock: RSEs from the registry per experiment, Mbps as Rucio's submitter reads
them, the activity's window, per-activity settings, problems that say what to add, the CSV Rucio's CLI imports, and
the access policy."""

from __future__ import annotations

import copy
import csv
import html
import io
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from challenges.documents import PlanDocumentError
from challenges.injection import RUCIO_CSV_COLUMNS, inject_rate_mbps, injection_plans
from challenges.models import Activity, Challenge
from challenges.plan import plan_export, plan_import
from sites.choices import Role
from sites.models import Experiment, Site
from sites.roles import membership_grant
from sites.services import sites_import
from sites.tokens import token_create

pytestmark = pytest.mark.django_db

# The column names Rucio's CLI reads (lib/rucio/cli/loadinjection.py `_normalize_csv`, after `.lower()` and
# "_" -> "-"); any other column makes it refuse the file.
RUCIO_CLI_KEYS = {
    "src-rse",
    "dest-rse",
    "inject-rate",
    "start-time",
    "end-time",
    "interval",
    "fudge",
    "max-injection",
    "expiration-delay",
    "rule-lifetime",
    "big-first",
    "dry-run",
    "comments",
}


def registry_document() -> dict[str, Any]:
    return {
        "experiments": [{"name": "ATLAS"}, {"name": "CMS"}],
        "sites": [
            {
                "name": "CERN",
                "tier": 0,
                "country": "CH",
                "experiments": ["ATLAS", "CMS"],
                "endpoints": [
                    {
                        "url": "root://eosatlas.cern.ch//eos/atlas",
                        "rse": ["CERN-PROD_DATADISK"],
                        "experiments": ["ATLAS"],
                    },
                    {"url": "root://eoscms.cern.ch//eos/cms", "rse": ["T0_CH_CERN_Disk"], "experiments": ["CMS"]},
                ],
            },
            {
                "name": "CNAF",
                "tier": 1,
                "country": "IT",
                "experiments": ["ATLAS", "CMS"],
                "endpoints": [
                    {"url": "root://tape.cr.cnaf.infn.it//atlas", "kind": "tape", "rse": ["INFN-T1_DATATAPE"]}
                ],
            },
            {
                "name": "BNL",
                "tier": 1,
                "country": "US",
                "experiments": ["ATLAS"],
                "endpoints": [
                    {"url": "root://dcgftp.usatlas.bnl.gov//tape", "kind": "tape", "rse": ["BNL-OSG2_DATATAPE"]}
                ],
            },
            {
                "name": "KIT",
                "tier": 1,
                "country": "DE",
                "experiments": ["CMS"],
                "endpoints": [{"url": "davs://cmsdcache-kit-disk.gridka.de:2880/pnfs", "rse": ["T1_DE_KIT_Disk"]}],
            },
        ],
    }


def tape_write(**overrides: Any) -> dict[str, Any]:
    activity = {
        "name": "ATLAS DT",
        "experiment": "ATLAS",
        "mode": "DT",
        "kind": "tape-write",
        "start": "2022-03-14T00:00:00Z",
        "end": "2022-03-18T12:00:00Z",
        "source": "CERN",
        "targets": [
            {"site": "CNAF", "direction": "in", "rate": 4.5e9},
            {"site": "BNL", "direction": "in", "rate": 2.5e9},
        ],
    }
    return activity | overrides


def plan_document(*activities: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "Tape Challenge 2022",
        "slug": "tc22",
        "start": "2022-03-07T00:00:00Z",
        "end": "2022-03-26T00:00:00Z",
        "activities": list(activities) or [tape_write()],
    }


@pytest.fixture
def registry() -> None:
    sites_import(document=registry_document())


def load(*activities: dict[str, Any]) -> Challenge:
    plan_import(document=plan_document(*activities))
    return Challenge.objects.get(slug="tc22")


def coordinator() -> Any:
    user, _ = get_user_model().objects.get_or_create(username="coordinator")
    membership_grant(user=user, role=Role.COORDINATOR)
    return user


def ddm_token(name: str) -> str:
    user, _ = get_user_model().objects.get_or_create(username=f"ddm-{name}")
    membership = membership_grant(user=user, role=Role.DDM, experiment=Experiment.objects.get(name=name))
    _, key = token_create(user=user, membership=membership)
    return key


def test_a_rate_in_bytes_per_second_is_mbps_as_rucios_submitter_reads_it() -> None:
    assert inject_rate_mbps(125000) == 1
    assert inject_rate_mbps(4.5e9) == 36000


def test_the_atlas_tape_write_gives_cern_disk_to_each_tape_rse_at_its_rate_over_the_window(registry: None) -> None:
    plans, problems = injection_plans(challenge=load(), user=coordinator())

    assert problems == []
    assert [(plan.src_rse, plan.dest_rse, plan.inject_rate, plan.inject_rate_bytes) for plan in plans] == [
        ("CERN-PROD_DATADISK", "BNL-OSG2_DATATAPE", 20000, 2.5e9),
        ("CERN-PROD_DATADISK", "INFN-T1_DATATAPE", 36000, 4.5e9),
    ]
    for plan in plans:
        assert (plan.start_time, plan.end_time) == (
            datetime(2022, 3, 14, tzinfo=UTC),
            datetime(2022, 3, 18, 12, tzinfo=UTC),
        )
        assert (plan.activity, plan.experiment) == ("ATLAS DT", "ATLAS")


def test_plans_carry_rucios_client_defaults_and_a_dry_run(registry: None) -> None:
    plan = injection_plans(challenge=load(), user=coordinator())[0][0]

    assert (plan.interval, plan.fudge, plan.max_injection, plan.expiration_delay, plan.rule_lifetime) == (
        900,
        0.0,
        0.2,
        1800,
        3600,
    )
    assert (plan.big_first, plan.dry_run) == (False, True)
    assert plan.comments == "tc22: ATLAS DT (ATLAS CERN -> BNL)"


def test_the_source_rse_is_the_one_of_the_endpoint_serving_the_activitys_experiment(registry: None) -> None:
    cms = tape_write(
        name="CMS T0",
        experiment="CMS",
        mode="T0",
        kind="transfer",
        targets=[{"site": "KIT", "direction": "in", "rate": 1e9}],
    )
    plans, problems = injection_plans(challenge=load(cms), user=coordinator())

    assert problems == []
    assert [(plan.src_rse, plan.dest_rse, plan.inject_rate) for plan in plans] == [
        ("T0_CH_CERN_Disk", "T1_DE_KIT_Disk", 8000)
    ]


def test_mode_dt_makes_a_transfer_land_on_the_tape_rse(registry: None) -> None:
    activity = tape_write(kind="transfer", targets=[{"site": "CNAF", "direction": "in", "rate": 1e9}])
    plans, _ = injection_plans(challenge=load(activity), user=coordinator())

    assert [plan.dest_rse for plan in plans] == ["INFN-T1_DATATAPE"]


def test_a_link_target_gives_its_link(registry: None) -> None:
    activity = tape_write(source=None, targets=[{"link": {"from": "CERN", "to": "BNL"}, "rate": 1.25e9}])
    del activity["source"]
    plans, _ = injection_plans(challenge=load(activity), user=coordinator())

    assert [(plan.src_rse, plan.dest_rse, plan.inject_rate) for plan in plans] == [
        ("CERN-PROD_DATADISK", "BNL-OSG2_DATATAPE", 10000)
    ]


def test_recalls_and_out_targets_give_no_plan(registry: None) -> None:
    recall = tape_write(name="ATLAS recall", mode="A-DT", kind="staging")
    out = tape_write(
        name="ATLAS export", kind="transfer", mode="T0", targets=[{"site": "CERN", "direction": "out", "rate": 1e9}]
    )
    plans, problems = injection_plans(challenge=load(recall, out), user=coordinator())

    assert (plans, problems) == ([], [])


def test_a_link_without_an_rse_is_a_problem_that_says_what_to_add_to_the_registry(registry: None) -> None:
    # CNAF has a tape RSE only: an ATLAS disk transfer there has no destination RSE.
    activity = tape_write(mode="T1", kind="transfer", targets=[{"site": "CNAF", "direction": "in", "rate": 1e9}])
    plans, problems = injection_plans(challenge=load(activity), user=coordinator())

    assert plans == []
    assert [(problem.activity, problem.place) for problem in problems] == [("ATLAS DT", "CERN -> CNAF")]
    assert "no disk RSE of ATLAS at CNAF" in problems[0].problem
    assert "give a disk endpoint of CNAF that serves ATLAS an `rse`" in problems[0].problem


def test_a_site_that_does_not_list_the_experiment_is_named_in_the_problem(registry: None) -> None:
    # CNAF's tape endpoint serves all of CNAF's experiments: once CNAF no longer lists CMS, none of CMS's.
    challenge = load(tape_write(experiment="CMS", targets=[{"site": "CNAF", "direction": "in", "rate": 1e9}]))
    assert injection_plans(challenge=challenge, user=coordinator())[0][0].dest_rse == "INFN-T1_DATATAPE"
    Site.objects.get(name="CNAF").experiments.remove(Experiment.objects.get(name="CMS"))
    plans, problems = injection_plans(challenge=challenge, user=coordinator())

    assert plans == []
    assert problems[0].problem.startswith("no tape RSE of CMS at CNAF")
    assert problems[0].problem.endswith("and add CMS to CNAF's experiments")


def test_an_in_target_without_a_source_asks_for_one(registry: None) -> None:
    activity = tape_write()
    del activity["source"]
    _, problems = injection_plans(challenge=load(activity), user=coordinator())

    assert {problem.problem for problem in problems} == {
        f"a target at {site} in needs the activity's source site: give the activity a source"
        for site in ("CNAF", "BNL")
    }


def test_an_rse_pair_planned_twice_is_a_problem_as_rucio_keeps_one_plan_per_pair(registry: None) -> None:
    later = tape_write(name="ATLAS DT 2", start="2022-03-20T00:00:00Z", end="2022-03-21T00:00:00Z")
    plans, problems = injection_plans(challenge=load(tape_write(), later), user=coordinator())

    assert len(plans) == 4
    assert [problem.activity for problem in problems] == ["ATLAS DT 2", "ATLAS DT 2"]
    assert "Rucio keeps one plan per RSE pair" in problems[0].problem


# --- per-activity settings in the plan document ----------------------------------------------------------------


def test_an_activitys_injection_settings_override_the_defaults(registry: None) -> None:
    activity = tape_write(injection={"interval": 600, "dry_run": False, "big_first": True, "comments": "go"})
    plan = injection_plans(challenge=load(activity), user=coordinator())[0][0]

    assert (plan.interval, plan.dry_run, plan.big_first, plan.comments) == (600, False, True, "go")
    assert (plan.fudge, plan.rule_lifetime) == (0.0, 3600)


def test_injection_settings_survive_export_and_import(registry: None) -> None:
    settings = {"interval": 600, "fudge": 0.1, "max_injection": 0.5, "expiration_delay": 0, "rule_lifetime": 7200}
    document = plan_export(challenge=load(tape_write(injection=settings)))

    assert document["activities"][0]["injection"] == settings
    plan_import(document=copy.deepcopy(document))
    assert Activity.objects.get(name="ATLAS DT").injection == settings
    assert "injection" not in plan_export(challenge=load(tape_write()))["activities"][0]


def test_bad_injection_settings_are_errors_by_place_and_nothing_is_stored(registry: None) -> None:
    bad = tape_write(
        injection={"interval": 0, "fudge": 2, "dry_run": "yes", "colour": "red", "expiration_delay": 1.5, "comments": 7}
    )
    with pytest.raises(PlanDocumentError) as caught:
        plan_import(document=plan_document(tape_write(name="fine"), bad))

    errors = {error["place"]: error["error"] for error in caught.value.errors}
    assert set(errors) == {
        f"activities[1].injection.{key}"
        for key in ("interval", "fudge", "dry_run", "colour", "expiration_delay", "comments")
    }
    assert errors["activities[1].injection.interval"] == "must be an integer from 1 to 86400 (seconds), not 0"
    assert errors["activities[1].injection.fudge"] == "must be a number from 0 to 1, not 2"
    assert errors["activities[1].injection.colour"].startswith("unknown key; allowed: interval, fudge")
    assert not Challenge.objects.filter(slug="tc22").exists()


def test_injection_must_be_a_mapping(registry: None) -> None:
    with pytest.raises(PlanDocumentError) as caught:
        plan_import(document=plan_document(tape_write(injection=[900])))

    assert [error["place"] for error in caught.value.errors] == ["activities[0].injection"]


# --- the API, its CSV and the page -------------------------------------------------------------------------------


def test_the_api_gives_the_plans_in_mbps_with_the_unit_and_the_window(registry: None) -> None:
    load()
    client = APIClient()
    client.force_authenticate(coordinator())
    data = client.get("/api/v1/challenges/tc22/injection-plans/").json()

    assert data["unit"] == "Mbps"
    assert "submitter reads Mbps" in data["unit_note"]
    assert data["problems"] == []
    by_dest = {plan["dest_rse"]: plan for plan in data["plans"]}
    assert by_dest["INFN-T1_DATATAPE"]["inject_rate"] == 36000
    assert by_dest["BNL-OSG2_DATATAPE"]["inject_rate"] == 20000
    assert by_dest["INFN-T1_DATATAPE"]["src_rse"] == "CERN-PROD_DATADISK"
    assert by_dest["INFN-T1_DATATAPE"]["inject_rate_bytes"] == 4.5e9
    assert (by_dest["INFN-T1_DATATAPE"]["start_time"], by_dest["INFN-T1_DATATAPE"]["end_time"]) == (
        "2022-03-14T00:00:00Z",
        "2022-03-18T12:00:00Z",
    )
    assert by_dest["INFN-T1_DATATAPE"]["dry_run"] is True


def test_the_csv_is_what_rucios_cli_imports(registry: None) -> None:
    load()
    client = APIClient()
    client.force_authenticate(coordinator())
    response = client.get("/api/v1/challenges/tc22/injection-plans/", {"format": "csv"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    text = response.content.decode()
    assert text.splitlines()[0] == ",".join(RUCIO_CSV_COLUMNS)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert {key.strip().lower().replace("_", "-") for key in rows[0]} == RUCIO_CLI_KEYS
    cnaf = next(row for row in rows if row["dest_rse"] == "INFN-T1_DATATAPE")
    assert cnaf == {
        "src_rse": "CERN-PROD_DATADISK",
        "dest_rse": "INFN-T1_DATATAPE",
        "inject_rate": "36000",
        "start_time": "2022-03-14 00:00:00",
        "end_time": "2022-03-18 12:00:00",
        "interval": "900",
        "fudge": "0.0",
        "max_injection": "0.2",
        "expiration_delay": "1800",
        "rule_lifetime": "3600",
        "big_first": "false",
        "dry_run": "true",
        "comments": "tc22: ATLAS DT (ATLAS CERN -> CNAF)",
    }


def test_csv_comments_are_formula_safe(registry: None) -> None:
    load(tape_write(injection={"comments": "=HYPERLINK(1)"}))
    client = APIClient()
    client.force_authenticate(coordinator())
    rows = list(
        csv.DictReader(io.StringIO(client.get("/api/v1/challenges/tc22/injection-plans/?format=csv").content.decode()))
    )

    assert rows[0]["comments"] == "'=HYPERLINK(1)"


def test_the_api_lists_links_without_rses_as_problems(registry: None) -> None:
    load(tape_write(mode="T1", kind="transfer", targets=[{"site": "CNAF", "direction": "in", "rate": 1e9}]))
    client = APIClient()
    client.force_authenticate(coordinator())
    data = client.get("/api/v1/challenges/tc22/injection-plans/").json()

    assert data["plans"] == []
    assert [(problem["activity"], problem["experiment"], problem["place"]) for problem in data["problems"]] == [
        ("ATLAS DT", "ATLAS", "CERN -> CNAF")
    ]


def test_a_ddm_token_reads_its_own_experiments_plans_only(registry: None) -> None:
    cms = tape_write(
        name="CMS T0",
        experiment="CMS",
        mode="T0",
        kind="transfer",
        targets=[{"site": "KIT", "direction": "in", "rate": 1e9}],
    )
    load(tape_write(), cms)
    url = "/api/v1/challenges/tc22/injection-plans/"

    atlas = Client().get(url, HTTP_AUTHORIZATION=f"Token {ddm_token('ATLAS')}").json()
    cms_view = Client().get(url, HTTP_AUTHORIZATION=f"Token {ddm_token('CMS')}").json()

    assert {plan["experiment"] for plan in atlas["plans"]} == {"ATLAS"}
    assert [plan["activity"] for plan in cms_view["plans"]] == ["CMS T0"]
    assert (
        "CMS T0"
        not in Client().get(url + "?format=csv", HTTP_AUTHORIZATION=f"Token {ddm_token('ATLAS')}").content.decode()
    )


def test_a_ddm_token_of_an_experiment_without_activities_gets_404(registry: None) -> None:
    load()
    response = Client().get("/api/v1/challenges/tc22/injection-plans/", HTTP_AUTHORIZATION=f"Token {ddm_token('CMS')}")

    assert response.status_code == 404


def test_an_unknown_challenge_is_404_also_as_csv(registry: None) -> None:
    client = APIClient()
    client.force_authenticate(coordinator())

    assert client.get("/api/v1/challenges/nope/injection-plans/").status_code == 404
    assert client.get("/api/v1/challenges/nope/injection-plans/?format=csv").status_code == 404


def test_the_api_takes_a_constant_number_of_queries(registry: None, django_assert_max_num_queries: Any) -> None:
    many = [
        tape_write(
            name=f"ATLAS DT {index}", start=f"2022-03-{10 + index}T00:00:00Z", end=f"2022-03-{10 + index}T06:00:00Z"
        )
        for index in range(6)
    ]
    load(*many)
    client = APIClient()
    client.force_authenticate(coordinator())
    with django_assert_max_num_queries(7):
        data = client.get("/api/v1/challenges/tc22/injection-plans/").json()
    assert len(data["plans"]) == 12


def test_the_page_states_the_unit_contradiction_and_lists_problems(registry: None) -> None:
    load(
        tape_write(),
        tape_write(
            name="ATLAS disk", mode="T1", kind="transfer", targets=[{"site": "CNAF", "direction": "in", "rate": 1e9}]
        ),
    )
    client = Client()
    client.force_login(coordinator())
    page = html.unescape(client.get("/challenges/tc22/injection-plans/").content.decode())

    assert "Rucio's client docstring says MB/s, its submitter reads Mbps" in page
    assert "Mbps = bytes/s x 8 / 10^6" in page
    assert "CERN-PROD_DATADISK" in page and "36000" in page
    assert "no disk RSE of ATLAS at CNAF" in page
    assert "/challenges/tc22/injection-plans/" in client.get("/challenges/tc22/").content.decode()


def test_the_page_exports_rucios_csv(registry: None) -> None:
    load()
    client = Client()
    client.force_login(coordinator())
    response = client.get("/challenges/tc22/injection-plans/", {"format": "csv"})

    assert response.content.decode().splitlines()[0] == ",".join(RUCIO_CSV_COLUMNS)
    assert "CERN-PROD_DATADISK,INFN-T1_DATATAPE,36000,2022-03-14 00:00:00" in response.content.decode()
