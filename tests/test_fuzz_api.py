"""The API fuzzed from its own OpenAPI schema (schemathesis): whatever a generated request holds, the answer is never
a 5xx, and its status is one the schema documents for the operation. Bounded (a few examples an operation) so that
the suite stays fast; run it with more examples by setting FUZZ_EXAMPLES (e.g. FUZZ_EXAMPLES=200 bin/portal test
tests/test_fuzz_api.py)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance

from portal.wsgi import application
from sites.models import Experiment, Site
from sites.roles import membership_grant
from sites.tokens import token_create
from tests.sites.factories import UserFactory

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "3"))


def _api_schema() -> Any:
    """The schema /api/schema/ serves, made by drf-spectacular here (no request, no database), bound to the WSGI
    application so that the generated requests go through the whole Django stack in this process."""
    raw = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    loaded = schemathesis.openapi.from_dict(raw)
    loaded.app = application
    loaded.location = "/api/schema/"
    return loaded


@pytest.fixture
def coordinator_key(transactional_db: Any) -> str:
    """A coordinator's token over a small registry, so that generated requests reach the code behind the doors."""
    atlas = Experiment.objects.create(name="ATLAS")
    Site.objects.create(name="CNAF", tier=1, country="IT").experiments.set([atlas])
    user = UserFactory(username="fuzzer")
    membership_grant(user=user, role="coordinator")
    _, key = token_create(user=user)
    return key


schema = _api_schema()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_request_gets_a_server_error(case: Any, coordinator_key: str) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Token {coordinator_key}"}, checks=[not_a_server_error, status_code_conformance]
    )
