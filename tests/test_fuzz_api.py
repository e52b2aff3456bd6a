"""The API fuzzed from its own OpenAPI schema (schemathesis) with every check, on a loaded registry and plan: the
answer is never a 5xx, its status and body are those the schema documents (errors JSON too), what the schema allows
is taken and what it forbids refused. Bounded (a few examples an operation) so that the suite stays fast; run it
with more examples by setting FUZZ_EXAMPLES (e.g. FUZZ_EXAMPLES=200 bin/portal test tests/test_fuzz_api.py)."""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import schemathesis
import yaml
from django.test import Client
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from challenges.models import Activity, Challenge, Target
from challenges.plan import plan_import
from portal.demo import demo_plan
from portal.wsgi import application
from results.api.pagination import cursor_encode
from sites.roles import membership_grant
from sites.tokens import token_create
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory, UserFactory

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "3"))

# What a valid body names by reference is one the loaded registry and plan hold (schemathesis' "seed known test
# data"): the schema cannot say which names exist, and a name that does not is a 400 with the field and the reason.
WRITES = {"POST", "PUT", "PATCH"}
SITES = ("TB-T0", "TB-T1-A", "TB-T1-B", "TB-TAPE", "TB-ORIGIN")
KNOWN = {
    "challenge": "demo",
    "experiment": "ATLAS",
    "experiments": ["ATLAS"],
    "site": SITES[0],
    "sites": [SITES[0]],
    "source": SITES[1],
}


def _api_schema() -> Any:
    """The schema /api/schema/ serves, made by drf-spectacular here (no request, no database), bound to the WSGI
    application so that the generated requests go through the whole Django stack in this process; every check
    on (`--checks all`), positive and negative data."""
    raw = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    config = SchemathesisConfig.from_dict({"checks": {"enabled": True}})
    loaded = schemathesis.openapi.from_dict(raw, config=config)
    loaded.app = application
    loaded.location = "/api/schema/"
    return loaded


@pytest.fixture
def coordinator_key(transactional_db: Any) -> str:
    """A coordinator's token over a loaded registry (sites, endpoints) and plan (the demo challenge, running now),
    so that generated requests reach the code behind the doors."""
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    for name in SITES:
        StorageEndpointFactory(site=SiteFactory(name=name, experiments=[atlas, cms]))
    plan_import(document=demo_plan(now=timezone.now()))
    user = UserFactory(username="fuzzer")
    membership_grant(user=user, role="coordinator")
    _, key = token_create(user=user)
    return key


schema = _api_schema()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_check_passes_on_every_operation(case: Any, coordinator_key: str) -> None:
    known_names_seed(case)
    # A write's validity also depends on what is stored and on its other fields (an activity's window inside its
    # challenge's and on whole minutes, a target's site among its experiment's, a silence that ends in the future):
    # no schema can say it, and such a refusal is a 400 with the field and the reason, which the apps' API tests
    # check. Every other check holds for writes too: what the schema forbids is refused.
    excluded = [positive_data_acceptance] if case.method in WRITES else []
    case.call_and_validate(headers={"Authorization": f"Token {coordinator_key}"}, excluded_checks=excluded)


def known_names_seed(case: Any) -> None:
    """In a request that the schema allows, the names of what it refers to are ones that exist, and a records
    cursor is one of the list's (a request the schema forbids is sent as generated: its refusal is what the checks
    look at)."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    if isinstance(case.query, dict) and case.query.get("after"):
        case.query["after"] = cursor_encode(datetime(2026, 1, 1, tzinfo=UTC), 1)
    if not isinstance(case.body, dict):
        return
    for field, name in KNOWN.items():
        if field in case.body and case.body[field] is not None:
            case.body[field] = name


# The plan import with numbers at the edges of a double: whatever the document holds, the import answers 200 or 400
# (never a 5xx), a 400 changes nothing, and a plan it took answers the now board and the injection plans with 200.
# The schema says only "an object" of the document, so the generator above never reaches a target's rate: this
# strategy builds plan documents whose every numeric field may be extreme.
EXTREME_NUMBERS = st.one_of(
    st.sampled_from(
        [
            1e308,
            1.7e308,
            -0.0,
            0,
            -1,
            5e-324,
            1.25e12,
            math.nextafter(1.25e12, math.inf),
            2**31,
            2**63,
            10**400,
            "NaN",
            "Infinity",
            "1e308",
        ]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**70), max_value=2**70),
)
# Every number a plan document holds, by where it is.
CHALLENGE_NUMBERS = ("max_window", "stable_window")
ACTIVITY_NUMBERS = ("file_size", "file_count", "concurrency")
TARGET_NUMBERS = ("rate", "nominal_rate")
INJECTION_NUMBERS = ("interval", "fudge", "max_injection", "expiration_delay", "rule_lifetime")
ALERT_NUMBERS = ("at_risk_fraction", "drop_minutes", "failure_min_attempts")


def _some(draw: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(keys), unique=True, max_size=len(keys)))
    return {key: draw(EXTREME_NUMBERS) for key in chosen}


@st.composite
def extreme_plans(draw: Any) -> str:
    """A plan document running now (so that the board projects it), its numbers drawn from EXTREME_NUMBERS, as JSON
    (NaN and Infinity as JSON's parser takes them) or YAML (.nan, .inf)."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start, end = (hour - timedelta(days=1)).isoformat(), (hour + timedelta(days=1)).isoformat()
    target: dict[str, Any] = {"site": SITES[0], "direction": "in", **_some(draw, TARGET_NUMBERS)}
    if draw(st.booleans()):
        target["factors"] = {"headroom": draw(EXTREME_NUMBERS)}
    activity = {
        "name": "fuzzed",
        "experiment": "ATLAS",
        "mode": "T0",
        "kind": "transfer",
        "start": start,
        "end": end,
        "targets": [target],
        **_some(draw, ACTIVITY_NUMBERS),
    }
    if injection := _some(draw, INJECTION_NUMBERS):
        activity["injection"] = injection
    document = {"name": "Fuzzed", "slug": "fuzzed", "start": start, "end": end, "activities": [activity]}
    document |= _some(draw, CHALLENGE_NUMBERS)
    if alerts := _some(draw, ALERT_NUMBERS):
        document["alerts"] = alerts
    if draw(st.booleans()):
        return yaml.safe_dump(document)
    return json.dumps(document)  # allow_nan: NaN and Infinity as the literals Python's parser takes back


def _stored_plan() -> list[Any]:
    return [
        *Challenge.objects.values_list("name", "max_window", "stable_window", "alert_thresholds"),
        *Activity.objects.values_list("file_size", "file_count", "concurrency", "injection"),
        *Target.objects.values_list("rate", "nominal_rate", "factors"),
    ]


@given(text=extreme_plans())
@settings(max_examples=max(EXAMPLES * 10, 30), deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_plan_import_takes_extreme_numbers_without_a_server_error(text: str, coordinator_key: str) -> None:
    client = Client(HTTP_AUTHORIZATION=f"Token {coordinator_key}")
    before = _stored_plan()
    content_type = "application/json" if text.startswith("{") else "application/yaml"

    response = client.post("/api/v1/challenges/import/", text, content_type=content_type)

    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert response.json()["errors"], "a refusal names its places"
        assert _stored_plan() == before
    for url in ("now/", "injection-plans/", "injection-plans/?format=csv", "plan/"):
        if Challenge.objects.filter(slug="fuzzed").exists():
            assert client.get(f"/api/v1/challenges/fuzzed/{url}").status_code == 200, url


# The agents' API with an agent's key (the coordinator's token above gets its 401s): every check, a claim waiting
# no time when none waits (a long poll of 25 s an example would only slow the suite).
agent_schema = schema.include(path_regex="^/api/v1/agent/")


@pytest.fixture
def agent_key(transactional_db: Any) -> str:
    from sites.agents import agent_enroll

    _, key = agent_enroll(site=SiteFactory(name=SITES[0]))
    return key


@agent_schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_check_passes_on_every_agent_operation(case: Any, agent_key: str) -> None:
    positive = case.meta is not None and case.meta.generation.mode.is_positive
    if positive and case.path.endswith("/claim/"):  # a claim with no body waits the default 25 s
        case.body = {**(case.body if isinstance(case.body, dict) else {}), "wait": 0}
    case.call_and_validate(headers={"Authorization": f"Agent {agent_key}"}, excluded_checks=[positive_data_acceptance])
