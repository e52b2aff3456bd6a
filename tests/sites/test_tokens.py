"""API tokens: issued once and stored hashed, checked with clear 401s, issued by `create_token` and by the
coordinators' token page, revoked."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory
from rest_framework.views import APIView

from sites.authentication import ApiTokenAuthentication
from sites.choices import Role
from sites.models import ApiToken, Experiment, Membership, Site
from sites.roles import membership_grant, user_roles
from sites.tokens import token_authenticate, token_create, token_revoke

pytestmark = pytest.mark.django_db

User = get_user_model()


def authenticate(key: str) -> Any:
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Token {key}")
    return ApiTokenAuthentication().authenticate(Request(request))


class WhoAmI(APIView):
    """A view that only this authentication class guards, whatever the project's REST_FRAMEWORK settings."""

    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response({"username": request.user.get_username()})


def call_whoami(key: str) -> Response:
    return WhoAmI.as_view()(APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Token {key}"))


@pytest.fixture
def user() -> Any:
    return User.objects.create_user("client")


# --- issuing and storing ---------------------------------------------------------------------------------------


def test_the_key_is_returned_once_and_only_its_hash_is_stored(user: Any) -> None:
    token, key = token_create(user=user, name="ci")
    stored = ApiToken.objects.filter(pk=token.pk).values().get()
    assert all(key not in str(value) for value in stored.values())
    assert stored["key_hash"] == hashlib.sha256(key.encode()).hexdigest()
    assert stored["prefix"] == key[:8]
    assert len(key) >= 43  # 32 random bytes, URL-safe base64


def test_two_tokens_never_share_a_key(user: Any) -> None:
    assert token_create(user=user)[1] != token_create(user=user)[1]


@override_settings(API_TOKEN_DAYS=7)
def test_a_token_expires_after_api_token_days_unless_told_otherwise(user: Any) -> None:
    default, _ = token_create(user=user)
    short, _ = token_create(user=user, days=1)
    assert abs(default.expires - (timezone.now() + timedelta(days=7))) < timedelta(minutes=1)
    assert abs(short.expires - (timezone.now() + timedelta(days=1))) < timedelta(minutes=1)


# --- authentication ---------------------------------------------------------------------------------------------


def test_a_live_key_authenticates_its_user(user: Any) -> None:
    token, key = token_create(user=user)
    authenticated_user, authenticated_token = authenticate(key)
    assert authenticated_user == user
    assert authenticated_token == token
    assert call_whoami(key).data == {"username": "client"}


def test_a_request_without_a_token_header_is_left_to_other_classes() -> None:
    assert ApiTokenAuthentication().authenticate(Request(APIRequestFactory().get("/"))) is None
    basic = APIRequestFactory().get("/", HTTP_AUTHORIZATION="Basic abc")
    assert ApiTokenAuthentication().authenticate(Request(basic)) is None


@pytest.mark.parametrize(
    ("state", "message"),
    [("unknown", "Invalid token."), ("expired", "Token expired."), ("revoked", "Token revoked.")],
)
def test_a_bad_key_is_a_401_that_says_why(user: Any, state: str, message: str) -> None:
    token, key = token_create(user=user)
    if state == "unknown":
        key = key[::-1]
    elif state == "expired":
        ApiToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(seconds=1))
    else:
        token_revoke(token=token)
    with pytest.raises(AuthenticationFailed, match=message):
        authenticate(key)
    assert token_authenticate(key=key) is None
    response = call_whoami(key)
    assert response.status_code == 401
    assert response.data["detail"] == message
    assert response["WWW-Authenticate"] == "Token"


def test_a_token_of_an_inactive_user_is_refused(user: Any) -> None:
    _, key = token_create(user=user)
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(AuthenticationFailed, match="inactive"):
        authenticate(key)


def test_revoking_twice_keeps_the_first_time(user: Any) -> None:
    token, _ = token_create(user=user)
    token_revoke(token=token)
    first = token.revoked
    token_revoke(token=token)
    token.refresh_from_db()
    assert token.revoked == first


def test_the_first_use_records_last_used(user: Any) -> None:
    token, key = token_create(user=user)
    assert token.last_used is None
    authenticate(key)
    token.refresh_from_db()
    assert token.last_used is not None
    assert timezone.now() - token.last_used < timedelta(minutes=1)


def test_uses_within_a_minute_write_nothing(user: Any) -> None:
    _, key = token_create(user=user)
    authenticate(key)
    with CaptureQueriesContext(connection) as queries:
        authenticate(key)
    assert [query["sql"] for query in queries if query["sql"].startswith("UPDATE")] == []


def test_a_use_after_a_minute_moves_last_used(user: Any) -> None:
    token, key = token_create(user=user)
    earlier = timezone.now() - timedelta(minutes=5)
    ApiToken.objects.filter(pk=token.pk).update(last_used=earlier)
    authenticate(key)
    token.refresh_from_db()
    assert token.last_used is not None and token.last_used > earlier + timedelta(minutes=4)


def test_a_token_authenticates_a_call_to_the_api(user: Any) -> None:
    # End to end through the project's REST_FRAMEWORK settings (ApiTokenAuthentication listed first).
    _, key = token_create(user=user)
    client = APIClient()
    assert client.get("/api/v1/status/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/status/").status_code == 200


# --- manage.py create_token -------------------------------------------------------------------------------------


def create_token(*args: str) -> list[str]:
    out = StringIO()
    call_command("create_token", *args, stdout=out)
    return out.getvalue().splitlines()


def test_create_token_prints_the_key_alone_on_the_last_line_and_the_key_works() -> None:
    lines = create_token("--user", "rucio-atlas", "--role", "viewer", "--name", "monitoring")
    key = lines[-1]
    assert key == key.strip() and " " not in key
    user, token = authenticate(key)
    assert user.username == "rucio-atlas"
    assert token.name == "monitoring"
    assert not user.has_usable_password()
    assert user_roles(user=user) == {Role.VIEWER}
    assert all(key not in line for line in lines[:-1])


def test_create_token_scopes_a_ddm_service_to_an_experiment_named_in_any_case() -> None:
    atlas = Experiment.objects.create(name="ATLAS")
    key = create_token("--user", "rucio", "--role", "ddm", "--experiment", "atlas", "--days", "3")[-1]
    _, token = authenticate(key)
    assert Membership.objects.get(user=token.user).experiment == atlas
    assert token.expires - timezone.now() < timedelta(days=3)


def test_create_token_scopes_a_site_admin_to_a_site() -> None:
    site = Site.objects.create(name="CERN-PROD", tier=0, country="CH")
    create_token("--user", "admin", "--role", "site-admin", "--site", "CERN-PROD")
    assert Membership.objects.get(user__username="admin").site == site


def test_create_token_reuses_an_existing_user_and_keeps_their_password() -> None:
    User.objects.create_user("alice", password="long-secret-1")
    create_token("--user", "alice", "--role", "coordinator")
    alice = User.objects.get(username="alice")
    assert alice.check_password("long-secret-1")
    assert ApiToken.objects.filter(user=alice).count() == 1


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--role", "owner"], "unknown role 'owner'"),
        (["--role", "site-admin"], "needs a site"),
        (["--role", "ddm"], "needs an experiment"),
        (["--role", "viewer", "--site", "CERN-PROD"], "global"),
        (["--role", "site-admin", "--site", "NOWHERE"], "no site named 'NOWHERE'"),
        (["--role", "ddm", "--experiment", "LHCb"], "no experiment named 'LHCb'"),
        (["--role", "viewer", "--days", "0"], "at least one day"),
    ],
)
def test_create_token_refuses_a_role_or_scope_that_does_not_fit_and_stores_nothing(args: list[str], error: str) -> None:
    Site.objects.create(name="CERN-PROD", tier=0, country="CH")
    with pytest.raises(CommandError, match=error):
        create_token("--user", "someone", *args)
    assert not User.objects.filter(username="someone").exists()
    assert not ApiToken.objects.exists()


# --- the coordinators' token page -------------------------------------------------------------------------------


@pytest.fixture
def coordinator_client(client: Client) -> Client:
    coordinator = User.objects.create_user("coord")
    membership_grant(user=coordinator, role=Role.COORDINATOR)
    client.force_login(coordinator)
    return client


def test_the_token_page_sends_anonymous_visitors_to_the_login(client: Client) -> None:
    response = client.get(reverse("tokens:list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("role", [Role.VIEWER, Role.DDM, Role.SITE_ADMIN])
def test_the_token_page_is_forbidden_to_everyone_but_coordinators(client: Client, role: Role) -> None:
    user = User.objects.create_user("someone")
    scope: dict[str, Any] = {}
    if role == Role.DDM:
        scope = {"experiment": Experiment.objects.create(name="ATLAS")}
    elif role == Role.SITE_ADMIN:
        scope = {"site": Site.objects.create(name="OWN", tier=1, country="IT")}
    membership_grant(user=user, role=role, **scope)
    token, _ = token_create(user=user)
    client.force_login(user)
    assert client.get(reverse("tokens:list")).status_code == 403
    assert client.post(reverse("tokens:list"), {"username": "x", "role": "coordinator", "days": 1}).status_code == 403
    assert client.post(reverse("tokens:revoke", args=[token.pk])).status_code == 403
    assert User.objects.filter(username="x").exists() is False
    token.refresh_from_db()
    assert token.revoked is None


def test_the_token_page_lists_every_token_without_its_key(
    coordinator_client: Client, django_assert_max_num_queries: Any
) -> None:
    keys = [token_create(user=User.objects.create_user(f"user{n}"), name=f"job {n}")[1] for n in range(5)]
    with django_assert_max_num_queries(8):
        response = coordinator_client.get(reverse("tokens:list"))
    page = response.content.decode()
    assert response.status_code == 200
    for n, key in enumerate(keys):
        assert key[:8] in page and f"job {n}" in page and f"user{n}" in page
        assert key not in page
    assert response["Cache-Control"].startswith("max-age=0") or "no-cache" in response["Cache-Control"]


def test_issuing_a_token_on_the_page_shows_the_key_once(coordinator_client: Client) -> None:
    atlas = Experiment.objects.create(name="ATLAS")
    body = {"username": "rucio", "role": "ddm", "experiment": "ATLAS", "name": "ingest", "days": 30}
    response = coordinator_client.post(reverse("tokens:list"), body)
    assert response.status_code == 200
    key = response.context["issued_key"]
    assert key in response.content.decode()
    user, token = authenticate(key)
    assert user.username == "rucio" and token.name == "ingest"
    assert Membership.objects.get(user=user).experiment == atlas
    assert key not in coordinator_client.get(reverse("tokens:list")).content.decode()


def test_a_token_whose_scope_does_not_fit_the_role_shows_the_error_at_the_field(coordinator_client: Client) -> None:
    response = coordinator_client.post(reverse("tokens:list"), {"username": "admin", "role": "site-admin", "days": 5})
    assert response.status_code == 400
    assert response.context["form"].errors == {"site": ["a site admin needs a site"]}
    assert "a site admin needs a site" in response.content.decode()
    assert not ApiToken.objects.exists()
    assert not User.objects.filter(username="admin").exists()


def test_a_bad_username_shows_the_error_at_the_field(coordinator_client: Client) -> None:
    response = coordinator_client.post(reverse("tokens:list"), {"username": "a b/c", "role": "viewer", "days": 5})
    assert response.status_code == 400
    assert "username" in response.context["form"].errors
    assert not ApiToken.objects.exists()


def test_a_coordinator_revokes_a_token_and_it_stops_working(coordinator_client: Client, user: Any) -> None:
    token, key = token_create(user=user)
    response = coordinator_client.post(reverse("tokens:revoke", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked is not None
    with pytest.raises(AuthenticationFailed, match="Token revoked"):
        authenticate(key)


def test_revoking_needs_a_post(coordinator_client: Client, user: Any) -> None:
    token, _ = token_create(user=user)
    assert coordinator_client.get(reverse("tokens:revoke", args=[token.pk])).status_code == 405
    token.refresh_from_db()
    assert token.revoked is None


def test_revoking_needs_the_csrf_token(user: Any) -> None:
    coordinator = User.objects.create_superuser("root", password="x")
    client = Client(enforce_csrf_checks=True)
    client.force_login(coordinator)
    token, _ = token_create(user=user)
    assert client.post(reverse("tokens:revoke", args=[token.pk])).status_code == 403
    token.refresh_from_db()
    assert token.revoked is None


@pytest.mark.django_db
def test_a_token_carries_only_the_role_it_was_issued_for() -> None:
    """A viewer token of a user who also coordinates cannot write; a second DDM token does not widen the first."""
    from rest_framework.test import APIClient

    from sites.models import Experiment
    from sites.tokens import token_issue

    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    _, coordinator_key = token_issue(username="svc", role="coordinator")
    _, viewer_key = token_issue(username="svc", role="viewer")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {viewer_key}")
    assert client.post("/api/v1/experiments/", {"name": "LHCB"}, format="json").status_code == 403
    client.credentials(HTTP_AUTHORIZATION=f"Token {coordinator_key}")
    assert client.post("/api/v1/experiments/", {"name": "LHCB"}, format="json").status_code == 201
    atlas_token, _ = token_issue(username="ddm", role="ddm", experiment=atlas)
    token_issue(username="ddm", role="ddm", experiment=cms)
    assert atlas_token.membership is not None and atlas_token.membership.experiment == atlas
