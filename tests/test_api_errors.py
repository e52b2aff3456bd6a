"""Inputs the audit sent that answered 500: each now gets a 4xx with the reason, and changes nothing. And the errors
schemathesis found undocumented: each answered as the schema says (JSON everywhere under /api/, the documented
status, the bounds the schema gives)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from challenges.models import Challenge
from results.models import TransferRecord
from sites.models import Capacity, Experiment, Site
from sites.roles import membership_grant
from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def coordinator() -> Any:
    user = UserFactory(username="coord")
    membership_grant(user=user, role="coordinator")
    return user


@pytest.fixture
def api(coordinator: Any) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(coordinator)
    return client


@pytest.fixture
def held() -> dict[str, Any]:
    """A site and an experiment that a transfer record refers to."""
    atlas = Experiment.objects.create(name="ATLAS")
    site = Site.objects.create(name="CNAF", tier=1, country="IT")
    site.experiments.set([atlas])
    now = timezone.now()
    TransferRecord.objects.create(
        source_site=site, experiment=atlas, bytes=1, start=now, end=now, state="ok", origin="probe", origin_id="h"
    )
    return {"site": site, "experiment": atlas}


def test_deleting_a_site_that_records_refer_to_is_refused_with_how_many(api: APIClient, held: dict[str, Any]) -> None:
    response = api.delete(f"/api/v1/sites/{held['site'].pk}/")
    assert response.status_code == 409
    assert response.json()["held_by"] == {"transfer records": 1}
    assert "nothing was deleted" in response.json()["detail"]
    assert Site.objects.filter(pk=held["site"].pk).exists()
    assert api.delete(f"/api/v1/experiments/{held['experiment'].pk}/").status_code == 409


def test_a_second_capacity_of_a_site_is_a_conflict(api: APIClient, held: dict[str, Any]) -> None:
    body = {"site": "CNAF", "network_rate": 1e9}
    assert api.post("/api/v1/capacities/", body, format="json").status_code == 201
    second = api.post("/api/v1/capacities/", body, format="json")
    assert second.status_code == 409 and "has a capacity already" in second.json()["site"][0]
    assert Capacity.objects.count() == 1


def test_a_report_body_that_is_not_an_object_is_a_400(api: APIClient, held: dict[str, Any]) -> None:
    response = api.post("/api/v1/reports/", [1, 2], format="json")
    assert response.status_code == 400 and "JSON object" in str(response.json())


@pytest.mark.parametrize("url", ["/api/v1/challenges/a%00b/", "/api/v1/clock/now/?experiment=%00"])
def test_a_nul_byte_is_a_400(api: APIClient, url: str) -> None:
    assert api.get(url).status_code == 400


@pytest.mark.parametrize("url", ["/api/v1/challenges/", "/api/v1/challenges/import/", "/api/v1/sites/import/"])
def test_json_nested_ten_thousand_deep_is_a_400(api: APIClient, url: str) -> None:
    deep = "[" * 10000 + "]" * 10000
    response = api.post(url, deep, content_type="application/json")
    assert response.status_code == 400 and "deep" in str(response.content)


@pytest.mark.parametrize("year", [1970, 9999])
def test_a_challenge_in_1970_or_9999_is_refused_on_its_dates(api: APIClient, year: int) -> None:
    body = {"name": "y", "slug": "y", "start": f"{year}-01-01T00:00:00Z", "end": f"{year}-02-01T00:00:00Z"}
    response = api.post("/api/v1/challenges/", body, format="json")
    assert response.status_code == 400 and f"not {year}" in str(response.json())
    assert not Challenge.objects.exists()


def test_the_sites_page_lists_a_site_without_capacity_whose_name_has_a_slash(coordinator: Any) -> None:
    Site.objects.create(name="INFN/CNAF", tier=1, country="IT")
    client = Client(raise_request_exception=False)
    client.force_login(coordinator)
    page = client.get("/sites/")
    assert page.status_code == 200 and "/sites/INFN/CNAF/" in page.content.decode()
    assert client.get("/sites/INFN/CNAF/").status_code == 200


def test_an_fts_file_size_that_is_not_a_whole_number_is_rejected(api: APIClient, held: dict[str, Any]) -> None:
    message = {
        "tr_id": "t-1.5",
        "job_id": "j",
        "file_id": 1,
        "vo": "atlas",
        "src_url": "root://a.example.org//x",
        "dst_url": "root://b.example.org//x",
        "tr_timestamp_start": 1700000000000,
        "tr_timestamp_complete": 1700000001000,
        "file_size": 1.5,
        "t_final_transfer_state": "Ok",
    }
    body = api.post("/api/v1/ingest/fts/", [message], format="json").json()
    assert body["accepted"] == 0 and "whole number" in body["rejected"][0]["error"]
    assert not TransferRecord.objects.filter(origin_id__startswith="t-1.5").exists()


def test_guessing_tokens_from_one_address_is_stopped_with_429_and_when_to_come_back(coordinator: Any) -> None:
    from sites.authentication import TokenFailureThrottle
    from sites.tokens import token_create

    limit, _ = TokenFailureThrottle().parse_rate(TokenFailureThrottle().get_rate())
    client = APIClient()
    answers = [
        client.get("/api/v1/sites/", HTTP_AUTHORIZATION=f"Token guess-{n}").status_code for n in range(limit + 1)
    ]
    assert answers[:limit] == [401] * limit and answers[-1] == 429
    _, key = token_create(user=coordinator)
    refused = client.get("/api/v1/sites/", HTTP_AUTHORIZATION=f"Token {key}")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0  # even a good key, until the minute passes


def test_a_digit_int_cannot_read_is_refused_or_ignored_never_a_500(coordinator: Any, api: APIClient) -> None:
    """The character ² is a digit to str.isdigit() and not a number to int(): every place that reads a typed number
    (query parameters, form fields) takes ASCII digits only."""
    from challenges.choices import Direction
    from sweeps.models import Sweep
    from tests.challenges.factories import TargetFactory

    target = TargetFactory(direction=Direction.IN)
    slug = target.activity.challenge.slug
    sweep = Sweep.objects.create(name="s", parameters={})
    page = Client(raise_request_exception=False)
    page.force_login(coordinator)
    for url in (
        f"/results/{slug}/matrix/?concurrency=²&page=²",
        f"/results/{slug}/targets/{target.pk}/?bin=²",
        f"/sweeps/{sweep.pk}/compare/?with=²",
    ):
        assert page.get(url).status_code == 200, url
    form = page.post("/sweeps/new/", {"name": "x", "concurrency": "10, ²", "modes": ["pull"]})
    assert form.status_code == 200 and "whole numbers separated by commas" in form.content.decode()
    runs = api.get("/api/v1/runs/matrix/?runs=²")
    assert runs.status_code == 400 and "run ids are whole numbers" in str(runs.json())


def test_a_second_experiment_of_the_same_name_is_a_conflict_naming_the_field(api: APIClient) -> None:
    assert api.post("/api/v1/experiments/", {"name": "ATLAS"}, format="json").status_code == 201
    second = api.post("/api/v1/experiments/", {"name": "ATLAS"}, format="json")
    assert second.status_code == 409 and second.json()["name"]
    assert Experiment.objects.count() == 1


@pytest.mark.parametrize("url", ["/api/v1/nowhere/", "/api/v1/alerts/%C2%84/", "/api/v1/activities/1e-290/"])
def test_a_url_no_api_route_takes_is_a_json_404(api: APIClient, url: str) -> None:
    response = api.get(url)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json()["detail"]


def test_a_url_outside_the_api_keeps_the_html_404(api: APIClient) -> None:
    assert api.get("/nowhere/")["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("parameter", ["limit=abc", "limit=0", "limit=", "offset=-1", "offset=0.5", "offset=null"])
def test_a_page_parameter_that_is_not_a_whole_number_in_range_is_a_400_naming_it(
    api: APIClient, parameter: str
) -> None:
    response = api.get(f"/api/v1/experiments/?{parameter}")
    assert response.status_code == 400 and parameter.split("=", maxsplit=1)[0] in response.json()


def test_a_huge_offset_is_an_empty_page(api: APIClient) -> None:
    response = api.get(f"/api/v1/experiments/?offset={'9' * 30}&limit=5000")
    assert response.status_code == 200 and response.json()["results"] == []


@pytest.mark.parametrize("url", ["/api/v1/records/?concurrency=0.5", "/api/v1/runs/?activity=0"])
def test_a_number_filter_out_of_its_documented_range_is_a_400(api: APIClient, url: str) -> None:
    assert api.get(url).status_code == 400


def test_an_id_filter_takes_a_whole_number_written_with_a_point_zero(api: APIClient) -> None:
    assert api.get("/api/v1/records/?run=7.0").status_code == 200


def test_the_records_of_a_challenge_that_does_not_exist_are_none(api: APIClient) -> None:
    response = api.get("/api/v1/records/?challenge=nothing-like-it")
    assert response.status_code == 200 and response.json()["results"] == []


def test_alerts_of_a_challenge_that_does_not_exist_is_a_404_naming_the_parameter(api: APIClient) -> None:
    response = api.get("/api/v1/alerts/?challenge=nothing-like-it")
    assert response.status_code == 404 and response.json()["challenge"]


def test_an_error_of_a_csv_route_is_json_as_documented(api: APIClient) -> None:
    response = api.get("/api/v1/challenges/nothing-like-it/injection-plans/?format=csv")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json()["detail"]


def test_the_schema_says_a_name_may_not_be_blank_where_the_api_refuses_it(api: APIClient) -> None:
    schema = api.get("/api/schema/?format=json").json()
    assert schema["components"]["schemas"]["ExperimentRequest"]["properties"]["name"]["minLength"] == 1
    assert api.post("/api/v1/experiments/", {"name": ""}, format="json").status_code == 400


def test_a_number_where_the_schema_says_a_string_is_a_400_naming_the_field(api: APIClient) -> None:
    response = api.post("/api/v1/experiments/", {"name": 0}, format="json")
    assert response.status_code == 400 and response.json()["name"]
    assert not Experiment.objects.exists()


@pytest.mark.parametrize("batch", [[], [None, 1]])
def test_an_ingest_batch_of_any_items_is_taken_each_item_judged_on_its_own(api: APIClient, batch: list[Any]) -> None:
    response = api.post("/api/v1/ingest/fts/", batch, format="json")
    assert response.status_code == 200 and len(response.json()["rejected"]) == len(batch)


def test_targets_of_an_activity_that_does_not_exist_are_none(api: APIClient) -> None:
    response = api.get("/api/v1/targets/?activity=999999")
    assert response.status_code == 200 and response.json()["results"] == []


def test_a_server_error_under_the_api_is_json_and_a_page_elsewhere() -> None:
    from django.test import RequestFactory

    from portal.views import server_error

    api_answer = server_error(RequestFactory().get("/api/v1/sites/"))
    assert api_answer.status_code == 500 and api_answer["Content-Type"] == "application/json"
    assert "detail" in json.loads(api_answer.content)
    assert server_error(RequestFactory().get("/sites/"))["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("value", ["null", "0", "yes"])
def test_a_boolean_filter_takes_true_or_false_only(api: APIClient, value: str) -> None:
    assert api.get(f"/api/v1/failure-rules/?enabled={value}").status_code == 400
    assert api.get("/api/v1/failure-rules/?enabled=false").status_code == 200


@pytest.mark.parametrize("enabled", [0, 1, "true"])
def test_a_json_boolean_field_takes_true_or_false_only(api: APIClient, enabled: Any) -> None:
    body = {"pattern": "timed out", "category": "timeout", "enabled": enabled}
    response = api.post("/api/v1/failure-rules/", body, format="json")
    assert response.status_code == 400 and response.json()["enabled"]


def test_the_schema_says_a_text_query_parameter_holds_no_nul_byte(api: APIClient) -> None:
    schema = api.get("/api/schema/?format=json").json()
    [rse] = [p for p in schema["paths"]["/api/v1/endpoints/"]["get"]["parameters"] if p["name"] == "rse"]
    assert rse["schema"]["pattern"] == "^[^\\u0000]*$"
    assert api.get("/api/v1/endpoints/?rse=a%00b").status_code == 400


def test_an_empty_choice_filters_nothing_as_the_schema_says(api: APIClient) -> None:
    schema = api.get("/api/schema/?format=json").json()
    [state] = [p for p in schema["paths"]["/api/v1/sweeps/"]["get"]["parameters"] if p["name"] == "state"]
    assert "" in state["schema"]["enum"]
    assert api.get("/api/v1/sweeps/?state=").status_code == 200


def test_a_request_django_refuses_itself_is_a_json_400_under_the_api(api: APIClient) -> None:
    too_many = "&".join(f"f{number}=1" for number in range(1100))  # more than DATA_UPLOAD_MAX_NUMBER_FIELDS
    response = api.get(f"/api/v1/sites/?{too_many}")
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "TooManyFieldsSent" in response.json()["detail"]


@pytest.mark.parametrize(
    ("field", "value"),
    [("country", "ÉÉ"), ("country", "it"), ("contacts", None), ("contacts", [" "]), ("contacts", [0])],
)
def test_a_site_field_outside_its_documented_shape_is_a_400_naming_it(api: APIClient, field: str, value: Any) -> None:
    body = {"name": "CNAF", "tier": 1, "country": "IT", field: value}
    response = api.post("/api/v1/sites/", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert (
        api.post("/api/v1/sites/", {**body, field: "IT" if field == "country" else ["ops"]}, format="json").status_code
        == 201
    )


@pytest.mark.parametrize(
    ("field", "value"), [("longitude", False), ("latitude", "45.5"), ("tier", "1"), ("tier", True)]
)
def test_a_json_number_field_takes_numbers_only(api: APIClient, field: str, value: Any) -> None:
    response = api.post("/api/v1/sites/", {"name": "CNAF", "tier": 1, "country": "IT", field: value}, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Site.objects.exists()


@pytest.mark.parametrize("experiments", [{}, "ATLAS"])
def test_a_to_many_field_that_is_not_a_list_is_a_400_naming_it(api: APIClient, experiments: Any) -> None:
    body = {"name": "CNAF", "tier": 1, "country": "IT", "experiments": experiments}
    response = api.post("/api/v1/sites/", body, format="json")
    assert response.status_code == 400 and response.json()["experiments"]
    assert not Site.objects.exists()
