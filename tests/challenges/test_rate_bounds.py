"""Numbers within physics: a target rate is finite, positive and at most TARGET_RATE_MAX (10 Tb/s by default) on
every way in (the plan document, the API, the form); a document's NaN, Infinity and numbers beyond a double are
refused with their place; a target at the bound answers every surface with 200; and rows a restored old database
holds beyond what a double's arithmetic survives are read at the ceiling, flagged, not answered with a 500."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.checks import Error
from django.db import connection
from django.test import Client, override_settings
from rest_framework.test import APIClient

from challenges.apps import target_rate_max_check
from challenges.injection import inject_rate_mbps
from challenges.models import TARGET_RATE_CEILING, Challenge, Target
from common.documents import NOT_FINITE
from sites.choices import Role
from sites.roles import membership_grant
from sites.services import sites_import

pytestmark = pytest.mark.django_db

BOUND = 1.25e12  # the default TARGET_RATE_MAX: 10 Tb/s
BOUND_TEXT = "10 Tb/s (1.25 TB/s)"


def registry_document() -> dict[str, Any]:
    return {
        "experiments": [{"name": "ATLAS"}],
        "sites": [
            {
                "name": "CERN",
                "tier": 0,
                "country": "CH",
                "experiments": ["ATLAS"],
                "endpoints": [{"url": "root://eosatlas.cern.ch//eos/atlas", "rse": ["CERN-PROD_DATADISK"]}],
            },
            {
                "name": "CNAF",
                "tier": 1,
                "country": "IT",
                "experiments": ["ATLAS"],
                "endpoints": [
                    {"url": "root://tape.cr.cnaf.infn.it//atlas", "kind": "tape", "rse": ["INFN-T1_DATATAPE"]}
                ],
            },
        ],
    }


@pytest.fixture(autouse=True)
def registry() -> None:
    sites_import(document=registry_document())


def running_plan(**target: Any) -> dict[str, Any]:
    """A challenge running now (its activity's window holds the present minute), with one target into CNAF."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (hour - timedelta(days=1)).isoformat(), (hour + timedelta(days=1)).isoformat()
    return {
        "name": "Bounds",
        "slug": "bounds",
        "start": start,
        "end": end,
        "activities": [
            {
                "name": "ATLAS T0",
                "experiment": "ATLAS",
                "mode": "DT",
                "kind": "tape-write",
                "start": start,
                "end": end,
                "source": "CERN",
                "targets": [{"site": "CNAF", "direction": "in", **(target or {"rate": 1e9})}],
            }
        ],
    }


def coordinator() -> Any:
    user, _ = get_user_model().objects.get_or_create(username="coordinator")
    membership_grant(user=user, role=Role.COORDINATOR)
    return user


def api_client() -> APIClient:
    client = APIClient()
    client.force_authenticate(coordinator())
    return client


def page_client() -> Client:
    client = Client()
    client.force_login(coordinator())
    return client


def import_text(text: str) -> Any:
    return api_client().post("/api/v1/challenges/import/", text, content_type="application/json")


def import_document(document: dict[str, Any]) -> Any:
    return import_text(json.dumps(document))


def stored_rates() -> list[float]:
    return list(Target.objects.values_list("rate", flat=True))


# The bound on the way in


def test_a_plan_with_a_rate_of_1_7e308_is_refused_naming_the_field_and_the_bound() -> None:
    response = import_document(running_plan(rate=1.7e308))

    assert response.status_code == 400
    errors = response.json()["errors"]
    assert [error["place"] for error in errors] == ["activities[0].targets[0].rate"]
    assert BOUND_TEXT in errors[0]["error"] and "1.7e+308 B/s" in errors[0]["error"]


def test_a_refused_plan_changes_nothing() -> None:
    assert import_document(running_plan(rate=1e9)).status_code == 200
    plan = running_plan(rate=1.7e308)
    plan["name"] = "Renamed"

    assert import_document(plan).status_code == 400
    assert stored_rates() == [1e9]
    assert Challenge.objects.get().name == "Bounds"


def test_a_rate_at_the_bound_is_taken() -> None:
    assert import_document(running_plan(rate=BOUND)).status_code == 200
    assert stored_rates() == [BOUND]


def test_a_rate_just_above_the_bound_is_refused() -> None:
    assert import_document(running_plan(rate=math.nextafter(BOUND, math.inf))).status_code == 400


@override_settings(TARGET_RATE_MAX=1e9)
def test_the_bound_is_the_setting() -> None:
    response = import_document(running_plan(rate=2e9))

    assert response.status_code == 400
    assert "8 Gb/s (1 GB/s)" in response.json()["errors"][0]["error"]


def test_a_huge_integer_rate_is_refused_not_a_server_error() -> None:
    response = import_text(json.dumps(running_plan(rate=1)).replace('"rate": 1', '"rate": 1' + "0" * 400))

    assert response.status_code == 400
    assert response.json()["errors"][0]["place"] == "activities[0].targets[0].rate"


def test_nominal_times_factors_beyond_the_bound_is_refused_at_the_nominal_rate() -> None:
    response = import_document(running_plan(nominal_rate=1e12, factors={"headroom": 1e300}))

    assert response.status_code == 400
    assert [error["place"] for error in response.json()["errors"]] == ["activities[0].targets[0].nominal_rate"]
    assert BOUND_TEXT in response.json()["errors"][0]["error"]


def test_nominal_times_factors_overflowing_a_double_is_refused_beside_a_given_rate() -> None:
    response = import_document(running_plan(rate=1e12, nominal_rate=1e12, factors={"a": 1e300}))

    assert response.status_code == 400
    assert Target.objects.count() == 0


def test_nominal_times_factors_underflowing_to_zero_is_refused_not_a_server_error() -> None:
    response = import_document(running_plan(nominal_rate=5e-324, factors={"efficiency": 0.1}))

    assert response.status_code == 400
    assert [error["place"] for error in response.json()["errors"]] == ["activities[0].targets[0].nominal_rate"]


def test_the_form_names_the_bound_for_a_rate_beyond_a_double() -> None:
    import_document(running_plan())
    target = Target.objects.get()

    response = page_client().post(
        f"/challenges/bounds/targets/{target.pk}/edit/", {"site": target.site_id, "direction": "in", "rate": "1e400"}
    )

    assert BOUND_TEXT in response.context["form"].errors["rate"][0]
    assert stored_rates() == [1e9]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_json_document_with_a_non_finite_number_is_refused_with_its_place(constant: str) -> None:
    text = json.dumps(running_plan(rate=1)).replace('"rate": 1', f'"rate": {constant}')

    response = import_text(text)

    assert response.status_code == 400
    assert response.json()["errors"][0]["place"] == "activities[0].targets[0].rate"
    assert "finite" in response.json()["errors"][0]["error"]


def test_a_yaml_document_with_nan_is_refused_with_its_place() -> None:
    text = json.dumps(running_plan(rate=1)).replace('"rate": 1', '"rate": .nan')
    response = api_client().post("/api/v1/challenges/import/", text, content_type="application/yaml")

    assert response.status_code == 400
    assert response.json()["errors"] == [{"place": "activities[0].targets[0].rate", "error": NOT_FINITE}]


def test_a_huge_integer_alert_threshold_is_refused() -> None:
    plan = running_plan()
    plan["alerts"] = {"drop_minutes": 10**30}

    response = import_document(plan)

    assert response.status_code == 400
    assert response.json()["errors"][0]["place"] == "alerts"


def test_the_api_refuses_a_target_rate_above_the_bound_naming_the_field() -> None:
    import_document(running_plan())
    target = Target.objects.get()

    response = api_client().patch(f"/api/v1/targets/{target.pk}/", {"rate": 1.7e308}, format="json")

    assert response.status_code == 400
    assert BOUND_TEXT in response.json()["rate"][0]
    assert stored_rates() == [1e9]


def test_the_form_refuses_a_target_rate_above_the_bound_beside_the_field() -> None:
    import_document(running_plan())
    target = Target.objects.get()

    response = page_client().post(
        f"/challenges/bounds/targets/{target.pk}/edit/", {"site": target.site_id, "direction": "in", "rate": "1.7e299"}
    )

    assert response.status_code == 200  # the form again, with its errors
    assert BOUND_TEXT in response.context["form"].errors["rate"][0]
    assert stored_rates() == [1e9]


def test_the_setting_out_of_its_range_is_a_configuration_error() -> None:
    with override_settings(TARGET_RATE_MAX=math.inf):
        assert [type(problem) for problem in target_rate_max_check(None)] == [Error]
    with override_settings(TARGET_RATE_MAX=TARGET_RATE_CEILING):
        assert target_rate_max_check(None) == []


# A target at the bound on every surface

SURFACES = (
    "/api/v1/challenges/bounds/now/",
    "/api/v1/challenges/bounds/injection-plans/",
    "/api/v1/challenges/bounds/injection-plans/?format=csv",
    "/api/v1/challenges/bounds/plan/",
    "/api/v1/targets/",
    "/api/v1/activities/",
    "/api/v1/challenges/bounds/links/",
    "/api/v1/challenges/bounds/rates/",
    "/challenges/bounds/",
    "/challenges/bounds/now/",
    "/challenges/bounds/injection-plans/",
    "/challenges/bounds/injection-plans/?format=csv",
    "/challenges/bounds/load/",
    "/challenges/bounds/links/",
    "/results/bounds/",
    "/results/bounds/targets/{target}/",
)


@pytest.mark.parametrize("url", SURFACES)
def test_a_target_at_the_bound_answers_200(url: str) -> None:
    assert import_document(running_plan(rate=BOUND)).status_code == 200
    client = api_client() if url.startswith("/api/") else page_client()

    assert client.get(url.format(target=Target.objects.get().pk)).status_code == 200


def test_the_now_board_gives_a_target_at_the_bound_as_finite_numbers() -> None:
    import_document(running_plan(rate=BOUND))

    row = api_client().get("/api/v1/challenges/bounds/now/").json()["targets"][0]

    assert row["target_rate"] == BOUND
    assert math.isfinite(row["required_rate"])


def test_a_target_at_the_bound_is_beyond_what_rucio_takes_and_says_so() -> None:
    import_document(running_plan(rate=BOUND))

    data = api_client().get("/api/v1/challenges/bounds/injection-plans/").json()

    assert data["plans"] == []
    assert "10000000 Mbps is outside what Rucio takes" in data["problems"][0]["problem"]


# Rows a restored old database holds, written before the bound (straight into the table)


def legacy_rate(value: str) -> None:
    """Write a target's rate straight into its table, as an old database restored would hold it."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE challenges_target SET rate = %s::double precision", [value])


@pytest.mark.parametrize("stored", ["1.7e308", "Infinity", "NaN"])
@pytest.mark.parametrize("url", SURFACES)
def test_a_legacy_rate_beyond_a_double_s_arithmetic_answers_200(stored: str, url: str) -> None:
    import_document(running_plan())
    legacy_rate(stored)
    client = api_client() if url.startswith("/api/") else page_client()

    assert client.get(url.format(target=Target.objects.get().pk)).status_code == 200


def test_a_legacy_rate_is_read_at_the_ceiling_and_flagged() -> None:
    import_document(running_plan())
    legacy_rate("1.7e308")

    target = Target.objects.get()

    assert target.rate == TARGET_RATE_CEILING
    assert target.stored_out_of_range == {"rate": 1.7e308}


def test_the_injection_plans_name_a_legacy_rate_as_a_problem_to_fix() -> None:
    import_document(running_plan())
    legacy_rate("Infinity")

    data = api_client().get("/api/v1/challenges/bounds/injection-plans/").json()

    assert data["plans"] == []
    assert "stored rate inf B/s" in data["problems"][0]["problem"]
    assert "import the plan again" in data["problems"][0]["problem"]


def test_a_legacy_nominal_rate_beyond_a_double_is_read_as_none() -> None:
    import_document(running_plan(rate=1e9, nominal_rate=1e9))
    with connection.cursor() as cursor:
        cursor.execute("UPDATE challenges_target SET nominal_rate = 'Infinity'::double precision")

    target = Target.objects.get()

    assert target.nominal_rate is None and target.derived_rate is None
    assert api_client().get("/api/v1/targets/").status_code == 200


def test_inject_rate_mbps_refuses_what_is_not_a_finite_rate() -> None:
    with pytest.raises(ValueError, match="finite"):
        inject_rate_mbps(math.inf)


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_an_integer_of_thousands_of_digits_is_refused_not_a_server_error(content_type: str) -> None:
    text = json.dumps(running_plan(rate=1)).replace('"rate": 1', '"rate": 1' + "0" * 5000)
    response = api_client().post("/api/v1/challenges/import/", text, content_type=content_type)

    assert response.status_code == 400
    assert "4300 digits" in response.json()["errors"][0]["error"]


@pytest.mark.parametrize("constant", ["NaN", "1e400", "1" + "0" * 400])
def test_the_sites_document_refuses_a_non_finite_capacity_with_its_place(constant: str) -> None:
    document = registry_document()
    document["sites"][0]["capacity"] = {"network_rate": 1}
    text = json.dumps(document).replace('"network_rate": 1', f'"network_rate": {constant}')

    response = api_client().post("/api/v1/sites/import/", text, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["errors"] == [{"place": "sites[0].capacity.network_rate", "error": NOT_FINITE}]
