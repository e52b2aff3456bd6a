"""Failure causes: the ordered rules (Python and SQL agree), re-categorisation, the causes page and the
coordinators' rule pages."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from challenges.models import Activity, Challenge, Target
from results.failures.causes import (
    failure_categorize,
    failure_categorize_records,
    failures_for_challenge,
    failures_recategorize,
)
from results.forms import FailureRuleForm
from results.models import FailureRule, TransferRecord
from results.services import records_store
from sites.models import Experiment, Site
from sites.roles import membership_grant

pytestmark = pytest.mark.django_db

T0 = datetime(2022, 3, 14, tzinfo=UTC)
_ids = itertools.count()

# Messages as gfal2, XRootD, davix and FTS write them, with the category each must land in.
REAL_MESSAGES = [
    ("TRANSFER [110] TRANSFER  Operation timed out", "timeout"),
    ("[gfal_xrootd_3rdcopy_check][gfal_xrootd_3rdcopy_check] Connection timed out", "timeout"),
    (
        "TRANSFER  Transfer canceled because the gsiftp performance marker timeout of 360 seconds has been exceeded",
        "timeout",
    ),
    ("DESTINATION MAKE_PARENT [5] Unable to connect to eosatlas.cern.ch:1094: SSL handshake failed", "tls"),
    ("TRANSFER [32] TRANSFER globus_xio: System error in send: Broken pipe", "tls"),
    ("TRANSFER [104] Connection reset by peer", "tls"),
    (
        "SOURCE CHECKSUM MISMATCH User defined checksum and source checksum do not match 6c3d9b01 != 1a2b3c4d",
        "checksum",
    ),
    ("DESTINATION CHECKSUM MISMATCH Source and destination checksums do not match", "checksum"),
    (
        "[ERROR] Server responded with an error: [3011] Unable to open file /eos/atlas/f1; No such file or directory",
        "no-such-file",
    ),
    ("SOURCE [2] Result HTTP 404 : File not found  after 1 attempts", "no-such-file"),
    (
        "DESTINATION [13] [ERROR] Server responded with an error: [3010] Unable to open file; Permission denied",
        "permission",
    ),
    ("TRANSFER [1] Copy failed: Result HTTP 403 : Permission refused  after 1 attempts", "permission"),
    ("SOURCE [1] Result HTTP 401 : Authentication Error after 1 attempts", "permission"),
    ("DESTINATION OVERWRITE Destination file exists and overwrite is not enabled", "file-exists"),
    ("[gfal2_mkdir] [17] File exists", "file-exists"),
    ("TRANSFER [111] Failed to connect to dcache-door.example.org port 2880: Connection refused", "connection-refused"),
    ("SOURCE [101] [ERROR] Socket error: Network is unreachable", "network-unreachable"),
    ("TRANSFER [113] No route to host", "network-unreachable"),
    ("STAGING [70] [BringOnline][bring_online] Operation timed out", "staging"),
    ("SOURCE [22] Locality is NEARLINE and the file is not staged", "staging"),
    ("TRANSFER Tape recall queue full, try again later", "staging"),
    ("TRANSFER [5] an unexpected internal error occurred", "other"),
    ("", "other"),
]


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def world() -> dict[str, Any]:
    atlas = Experiment.objects.create(name="ATLAS")
    cern = Site.objects.create(name="CERN", tier=0, country="CH")
    cnaf = Site.objects.create(name="CNAF", tier=1, country="IT")
    challenge = Challenge.objects.create(name="TC", slug="tc", start=at(0), end=at(180))
    world = {"atlas": atlas, "cern": cern, "cnaf": cnaf, "challenge": challenge}
    link_activity(world, challenge)
    return world


def link_activity(world: dict[str, Any], challenge: Challenge) -> None:
    """An ATLAS activity over the whole challenge with a target on CERN -> CNAF: the records count for it."""
    activity = Activity.objects.create(
        challenge=challenge,
        name="links",
        experiment=world["atlas"],
        mode="T0 export",
        kind="transfer",
        start=challenge.start,
        end=challenge.end,
    )
    Target.objects.create(activity=activity, link_from=world["cern"], link_to=world["cnaf"], rate=1e9)


def failed(world: dict[str, Any], message: str, *, end: float = 10, mode: str = "pull") -> TransferRecord:
    return TransferRecord(
        experiment=world["atlas"],
        source_site=world["cern"],
        destination_site=world["cnaf"],
        bytes=0,
        start=at(end - 1),
        end=at(end),
        state="failed",
        error_message=message,
        mode=mode,
        origin="fts",
        origin_id=f"f{next(_ids)}",
    )


def rule(pattern: str, category: str, position: int) -> FailureRule:
    return FailureRule.objects.create(pattern=pattern, category=category, position=position)


@pytest.mark.parametrize(("message", "category"), REAL_MESSAGES)
def test_the_default_rules_categorise_real_messages(message: str, category: str) -> None:
    assert failure_categorize(message) == category


def test_sql_recategorisation_agrees_with_the_python_rules_on_real_messages(world: dict[str, Any]) -> None:
    records_store(records=[failed(world, message) for message, _ in REAL_MESSAGES])
    TransferRecord.objects.update(error_category="")
    assert failures_recategorize() == len(REAL_MESSAGES)
    stored = dict(TransferRecord.objects.values_list("error_message", "error_category"))
    assert stored == {message: category for message, category in REAL_MESSAGES}


def test_the_first_matching_rule_wins(world: dict[str, Any]) -> None:
    FailureRule.objects.all().delete()
    rule("timed out", "timeout", 20)
    rule("bring.?online", "staging", 10)
    message = "[BringOnline] Operation timed out"
    assert failure_categorize(message) == "staging"
    records_store(records=[failed(world, message)])
    failures_recategorize()
    assert TransferRecord.objects.get().error_category == "staging"  # the SQL keeps the same precedence
    FailureRule.objects.filter(category="staging").update(position=30)
    assert failure_categorize(message) == "timeout"
    failures_recategorize()
    assert TransferRecord.objects.get().error_category == "timeout"


def test_a_disabled_rule_is_skipped() -> None:
    FailureRule.objects.filter(category="timeout").update(enabled=False)
    assert failure_categorize("Connection timed out") == "other"


def test_records_are_categorised_before_they_are_stored(world: dict[str, Any]) -> None:
    records = [failed(world, "Permission denied"), failed(world, "Checksum mismatch")]
    records[1].state = "ok"
    failure_categorize_records(records)
    assert [r.error_category for r in records] == ["permission", ""]


def test_recategorisation_moves_counts_after_a_rule_change(world: dict[str, Any]) -> None:
    message = "TRANSFER Operation aborted by the gridftp door"
    records = [failed(world, message) for _ in range(3)] + [failed(world, "Connection timed out")]
    failure_categorize_records(records)
    records_store(records=records)
    before = failures_for_challenge(challenge=world["challenge"]).links[0].counts
    assert before == {"other": 3, "timeout": 1}
    rule("aborted by the gridftp door", "connection-refused", 5)
    assert failures_recategorize(challenge=world["challenge"]) == 3
    after = failures_for_challenge(challenge=world["challenge"]).links[0].counts
    assert after == {"connection-refused": 3, "timeout": 1}
    assert failures_recategorize(challenge=world["challenge"]) == 0  # nothing left to change


def test_recategorising_one_challenge_leaves_other_records_alone(world: dict[str, Any]) -> None:
    records_store(records=[failed(world, "No such file", end=10), failed(world, "No such file", end=500)])
    TransferRecord.objects.update(error_category="")
    assert failures_recategorize(challenge=world["challenge"]) == 1
    assert sorted(TransferRecord.objects.values_list("error_category", flat=True)) == ["", "no-such-file"]


def test_the_recategorise_api_sends_a_task_for_one_challenge(
    world: dict[str, Any], tasks_run_here: None, django_capture_on_commit_callbacks: Any
) -> None:
    records_store(records=[failed(world, "No such file", end=10), failed(world, "No such file", end=500)])
    TransferRecord.objects.update(error_category="")
    with django_capture_on_commit_callbacks(execute=True):
        response = coordinator_api().post("/api/v1/failure-rules/recategorize/", {"challenge": "tc"}, format="json")
    assert response.status_code == 202 and response.json()["challenge"] == "tc"
    assert sorted(TransferRecord.objects.values_list("error_category", flat=True)) == ["", "no-such-file"]


@pytest.mark.parametrize(
    "pattern",
    ["(unclosed", r"\bword\b", "(?P<name>x)", "(?i)timeout", "   "],
)
def test_a_pattern_that_python_or_postgres_reads_otherwise_is_refused(pattern: str) -> None:
    form = FailureRuleForm({"pattern": pattern, "category": "other", "enabled": True})
    assert not form.is_valid()
    assert "pattern" in form.errors


def test_a_valid_rule_goes_to_the_end_of_the_order() -> None:
    form = FailureRuleForm({"pattern": "quota exceeded", "category": "other", "enabled": True})
    assert form.is_valid(), form.errors
    new = form.save()
    assert new.position > max(FailureRule.objects.exclude(pk=new.pk).values_list("position", flat=True))


def test_the_causes_list_the_most_common_messages_per_link_and_mode(world: dict[str, Any]) -> None:
    messages = [f"Unable to open root://eos.cern.ch//f{i}: No such file" for i in range(4)]  # one cause, 4 URLs
    messages += ["Connection timed out"] * 2 + [f"odd {i}" for i in range(5)]
    records = [failed(world, message) for message in messages] + [failed(world, "Broken pipe", mode="push")]
    failure_categorize_records(records)
    records_store(records=records)
    result = failures_for_challenge(challenge=world["challenge"])
    pull = next(link for link in result.links if link.mode == "pull")
    assert pull.messages[:2] == [("Unable to open <url>: No such file", 4), ("Connection timed out", 2)]
    assert len(pull.messages) == 5  # the top five
    assert pull.counts == {"no-such-file": 4, "timeout": 2, "other": 5}
    push = next(link for link in result.links if link.mode == "push")
    assert push.counts == {"tls": 1}


def test_the_causes_take_a_bounded_number_of_queries(world: dict[str, Any], django_assert_num_queries: Any) -> None:
    records = [failed(world, "Connection timed out", mode=mode) for mode in ("pull", "push", "streamed")]
    failure_categorize_records(records)
    records_store(records=records)
    with django_assert_num_queries(6):
        assert len(failures_for_challenge(challenge=world["challenge"]).links) == 3


def fts_failed(world: dict[str, Any], category: str, scope: str, phase: str) -> TransferRecord:
    record = failed(world, f"{scope} {category}")
    record.fts_error_category, record.error_scope, record.failure_phase = category, scope, phase
    return record


def test_the_causes_group_each_link_by_fts_category_scope_and_phase(world: dict[str, Any]) -> None:
    records = [fts_failed(world, "COMMUNICATION_ERROR", "DESTINATION", "TRANSFER_PREPARATION") for _ in range(3)]
    records += [fts_failed(world, "TIMEOUT", "TRANSFER", "TRANSFER"), failed(world, "no scheme")]
    records_store(records=records)
    link = failures_for_challenge(challenge=world["challenge"]).links[0]
    assert link.fts_causes == [
        ("COMMUNICATION_ERROR", "DESTINATION", "TRANSFER_PREPARATION", 3),
        ("", "", "", 1),
        ("TIMEOUT", "TRANSFER", "TRANSFER", 1),
    ]


def test_a_portal_runs_failure_is_given_the_fts_scheme_of_its_cause(world: dict[str, Any]) -> None:
    causes = {
        "destination refused the write: 403": ("PERMISSION_DENIED", "DESTINATION", "TRANSFER_PREPARATION"),
        "source file missing (root://x//f): No such file": ("FILE_NOT_FOUND", "SOURCE", "TRANSFER_PREPARATION"),
        "checksum mismatch: adler32 differs": ("CHECKSUM_MISMATCH", "TRANSFER", "TRANSFER_FINALIZATION"),
        "stalled: nothing moved for 120 s": ("TIMEOUT", "TRANSFER", "TRANSFER"),
        "something new": ("OTHER", "GENERAL_FAILURE", "TRANSFER"),
    }
    records = [failed(world, message) for message in causes]
    for record in records:
        record.origin = "probe"
    records.append(failed(world, "checksum mismatch: an FTS record"))  # FTS's own: not mapped
    records_store(records=records)
    stored = dict(TransferRecord.objects.values_list("error_message", "fts_error_category").order_by())
    for message, (category, _scope, _phase) in causes.items():
        assert stored[message] == category
    assert stored["checksum mismatch: an FTS record"] == ""
    scheme = TransferRecord.objects.filter(error_message__startswith="source file").values_list(
        "fts_error_category", "error_scope", "failure_phase"
    )
    assert list(scheme) == [causes["source file missing (root://x//f): No such file"]]


def test_the_failures_page_shows_and_exports_the_fts_scheme(client: Client, world: dict[str, Any]) -> None:
    records_store(records=[fts_failed(world, "COMMUNICATION_ERROR", "DESTINATION", "TRANSFER_PREPARATION")] * 1)
    viewer = logged_in(client, None)
    text = viewer.get("/results/tc/failures/").content.decode()
    assert "COMMUNICATION_ERROR / DESTINATION / TRANSFER_PREPARATION <strong>\N{MULTIPLICATION SIGN}1</strong>" in text
    rows = viewer.get("/results/tc/failures/", {"format": "json", "table": "fts"}).json()["rows"]
    assert rows == [
        {
            "source": "CERN",
            "destination": "CNAF",
            "mode": "pull",
            "category": "COMMUNICATION_ERROR",
            "scope": "DESTINATION",
            "phase": "TRANSFER_PREPARATION",
            "failures": 1,
        }
    ]


# --- pages ----------------------------------------------------------------------------------------------------


def logged_in(client: Client, role: str | None) -> Client:
    user = get_user_model().objects.create_user(role or "viewer")
    if role:
        membership_grant(user=user, role=role)
    client.force_login(user)
    return client


def test_the_failures_page_shows_counts_messages_and_the_hourly_plot(client: Client, world: dict[str, Any]) -> None:
    records = [failed(world, "Connection timed out", end=10), failed(world, "Permission denied", end=70)]
    failure_categorize_records(records)
    records_store(records=records)
    response = logged_in(client, None).get("/results/tc/failures/")
    assert response.status_code == 200
    text = response.content.decode()
    assert "Connection timed out" in text and "permission / authentication" in text
    assert (
        "/results/tc/records/?source=CERN&amp;destination=CNAF&amp;mode=pull&amp;state=failed&amp;category=timeout"
        in text
    )
    figure = json.loads(text.split('id="hourly-figure" type="application/json">')[1].split("</script>")[0])
    assert {trace["name"] for trace in figure["data"]} == {"timeout", "permission / authentication"}


def test_the_failures_page_exports_its_tables(client: Client, world: dict[str, Any]) -> None:
    records = [failed(world, "Connection timed out"), failed(world, "Connection timed out", end=70)]
    failure_categorize_records(records)
    records_store(records=records)
    viewer = logged_in(client, None)
    causes = viewer.get("/results/tc/failures/", {"format": "json"}).json()["rows"]
    assert causes == [{"source": "CERN", "destination": "CNAF", "mode": "pull", "failures": 2, "timeout": 2}]
    hourly = viewer.get("/results/tc/failures/", {"format": "csv", "table": "hourly"}).content.decode().splitlines()
    assert hourly == ["hour,category,failures", "2022-03-14T00:00:00Z,timeout,1", "2022-03-14T01:00:00Z,timeout,1"]
    messages = viewer.get("/results/tc/failures/", {"format": "json", "table": "messages"}).json()["rows"]
    assert messages[0]["count"] == 2


@pytest.mark.parametrize("role", [None, "site-admin", "ddm"])
def test_only_coordinators_reach_the_rule_pages(client: Client, world: dict[str, Any], role: str | None) -> None:
    user = get_user_model().objects.create_user("someone")
    if role == "site-admin":
        membership_grant(user=user, role=role, site=world["cern"])
    elif role == "ddm":
        membership_grant(user=user, role=role, experiment=world["atlas"])
    client.force_login(user)
    first = FailureRule.objects.first()
    assert first is not None
    assert client.get("/results/failures/rules/").status_code == 403
    assert client.post("/results/failures/rules/", {"pattern": "x", "category": "other"}).status_code == 403
    assert client.post(f"/results/failures/rules/{first.pk}/disable/").status_code == 403
    assert client.post("/results/failures/rules/recategorize/").status_code == 403
    assert FailureRule.objects.filter(enabled=True).count() == FailureRule.objects.count()


def test_a_coordinator_sees_a_bad_pattern_refused_in_place(client: Client) -> None:
    coordinator = logged_in(client, "coordinator")
    response = coordinator.post("/results/failures/rules/", {"pattern": "(broken", "category": "other"})
    assert response.status_code == 200
    assert "not a regular expression" in response.context["form"].errors["pattern"][0]
    assert not FailureRule.objects.filter(pattern="(broken").exists()


def test_a_coordinator_adds_reorders_disables_and_recategorises(
    client: Client, world: dict[str, Any], tasks_run_here: None, django_capture_on_commit_callbacks: Any
) -> None:
    coordinator = logged_in(client, "coordinator")
    records_store(records=[failed(world, "door said: quota exceeded")])
    response = coordinator.post(
        "/results/failures/rules/", {"pattern": "quota exceeded", "category": "permission", "enabled": "on"}
    )
    assert response.status_code == 302
    added = FailureRule.objects.get(pattern="quota exceeded")
    assert added == FailureRule.objects.order_by("position", "id").last()
    coordinator.post(f"/results/failures/rules/{added.pk}/up/")
    order = list(FailureRule.objects.order_by("position", "id").values_list("pk", flat=True))
    assert order[-2] == added.pk
    TransferRecord.objects.update(error_category="other")  # as before the rule, had no task run yet
    with django_capture_on_commit_callbacks() as callbacks:
        response = coordinator.post("/results/failures/rules/recategorize/", {"challenge": "tc"}, follow=True)
    assert "The failed records of TC are being re-categorised in the background" in response.content.decode()
    assert TransferRecord.objects.get().error_category == "other"  # not in the request
    for callback in callbacks:
        callback()
    assert TransferRecord.objects.get().error_category == "permission"
    coordinator.post(f"/results/failures/rules/{added.pk}/disable/")
    assert not FailureRule.objects.get(pk=added.pk).enabled
    assert coordinator.get("/results/failures/rules/", {"message": "quota exceeded"}).context["tried"] == "other"


def test_the_rules_api_refuses_a_bad_pattern_with_the_field() -> None:
    user = get_user_model().objects.create_user("boss")
    membership_grant(user=user, role="coordinator")
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/v1/failure-rules/", {"pattern": r"\bx", "category": "other"}, format="json")
    assert response.status_code == 400 and "pattern" in response.json()
    ok = client.post("/api/v1/failure-rules/", {"pattern": "quota", "category": "other"}, format="json")
    assert ok.status_code == 201
    queued = client.post("/api/v1/failure-rules/recategorize/", {"challenge": "nope"}, format="json")
    assert queued.status_code == 400 and queued.json() == {"challenge": ["no challenge 'nope'"]}
    queued = client.post("/api/v1/failure-rules/recategorize/")
    assert queued.status_code == 202 and queued.json() == {
        "detail": "re-categorising in the background",
        "challenge": None,
    }


def test_a_viewer_reads_but_cannot_write_the_rules_api() -> None:
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("viewer"))
    assert client.get("/api/v1/failure-rules/").json()["count"] == FailureRule.objects.count() > 0
    assert client.post("/api/v1/failure-rules/", {"pattern": "x", "category": "other"}).status_code == 403
    assert client.post("/api/v1/failure-rules/recategorize/").status_code == 403


# --- stored records follow the rules: every write of the rules re-categorises them after it commits -----------

QUOTA = "door said: quota exceeded"  # "other" by the default rules


@pytest.fixture
def quota(world: dict[str, Any], tasks_run_here: None) -> FailureRule:
    """A stored failure categorised by a rule "quota exceeded" -> permission, after the default rules."""
    records_store(records=[failed(world, QUOTA)])
    quota_rule = rule("quota exceeded", "permission", 1000)
    failures_recategorize()
    assert TransferRecord.objects.get().error_category == "permission"
    return quota_rule


def category() -> str:
    return TransferRecord.objects.get().error_category


def coordinator_api() -> APIClient:
    user = get_user_model().objects.create_user("rules-api")
    membership_grant(user=user, role="coordinator")
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_rule_added_on_the_page_recategorises_stored_records_after_the_commit(
    client: Client, quota: FailureRule, django_capture_on_commit_callbacks: Any
) -> None:
    coordinator = logged_in(client, "coordinator")
    with django_capture_on_commit_callbacks() as callbacks:
        response = coordinator.post(
            "/results/failures/rules/", {"pattern": "quota", "category": "staging", "position": 1, "enabled": "on"}
        )
    assert response.status_code == 302
    assert category() == "permission"  # not before the rule is committed
    for callback in callbacks:
        callback()
    assert category() == "staging"
    assert "re-categorised in the background" in coordinator.get("/results/failures/rules/").content.decode()


def test_a_rule_edited_on_the_page_recategorises_stored_records(
    client: Client, quota: FailureRule, django_capture_on_commit_callbacks: Any
) -> None:
    coordinator = logged_in(client, "coordinator")
    with django_capture_on_commit_callbacks(execute=True):
        coordinator.post(
            f"/results/failures/rules/{quota.pk}/edit/",
            {"pattern": "quota exceeded", "category": "staging", "position": 1000, "enabled": "on"},
        )
    assert category() == "staging"


@pytest.mark.parametrize(
    "steps",
    [
        [("disable", "staging"), ("enable", "permission")],
        [("delete", "staging")],
        [("down", "staging"), ("up", "permission")],
    ],
    ids=["disable-enable", "delete", "down-up"],
)
def test_a_rule_disabled_enabled_deleted_or_moved_on_the_page_recategorises_stored_records(
    client: Client, quota: FailureRule, django_capture_on_commit_callbacks: Any, steps: list[tuple[str, str]]
) -> None:
    rule("quota", "staging", 1001)  # matches too, after the quota rule
    coordinator = logged_in(client, "coordinator")
    for action, expected in steps:
        with django_capture_on_commit_callbacks(execute=True):
            assert coordinator.post(f"/results/failures/rules/{quota.pk}/{action}/").status_code == 302
        assert category() == expected, action


def test_rules_written_through_the_api_recategorise_stored_records(
    quota: FailureRule, django_capture_on_commit_callbacks: Any
) -> None:
    client = coordinator_api()
    with django_capture_on_commit_callbacks(execute=True):
        added = client.post(
            "/api/v1/failure-rules/", {"pattern": "quota", "category": "staging", "position": 1}, format="json"
        )
    assert added.status_code == 201 and category() == "staging"
    with django_capture_on_commit_callbacks(execute=True):
        client.patch(f"/api/v1/failure-rules/{added.json()['id']}/", {"position": 2000}, format="json")
    assert category() == "permission"
    with django_capture_on_commit_callbacks(execute=True):
        client.put(
            f"/api/v1/failure-rules/{quota.pk}/",
            {"pattern": "quota exceeded", "category": "file-exists", "position": 1000, "enabled": True},
            format="json",
        )
    assert category() == "file-exists"
    with django_capture_on_commit_callbacks(execute=True):
        assert client.delete(f"/api/v1/failure-rules/{quota.pk}/").status_code == 204
    assert category() == "staging"


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(get_user_model().objects.create_superuser("admin", "admin@example.org", "x"))
    return client


def test_a_rule_added_or_changed_in_the_admin_recategorises_stored_records(
    admin_client: Client, quota: FailureRule, django_capture_on_commit_callbacks: Any
) -> None:
    fields = {"pattern": "quota", "category": "staging", "position": 1, "enabled": "on", "note": ""}
    with django_capture_on_commit_callbacks(execute=True):
        assert admin_client.post("/admin/results/failurerule/add/", fields).status_code == 302
    assert category() == "staging"
    added = FailureRule.objects.get(pattern="quota")
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            f"/admin/results/failurerule/{added.pk}/change/", fields | {"category": "checksum"}
        )
    assert response.status_code == 302 and category() == "checksum"
    changelist = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": str(added.pk),  # "enabled" left out: unticked
        "_save": "Save",
    }
    with django_capture_on_commit_callbacks(execute=True):
        assert admin_client.post("/admin/results/failurerule/", changelist).status_code == 302
    assert not FailureRule.objects.get(pk=added.pk).enabled and category() == "permission"


def test_a_rule_deleted_in_the_admin_recategorises_stored_records(
    admin_client: Client, quota: FailureRule, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(f"/admin/results/failurerule/{quota.pk}/delete/", {"post": "yes"})
    assert category() == "other"


def test_rules_deleted_in_bulk_in_the_admin_recategorise_stored_records(
    admin_client: Client, quota: FailureRule, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/results/failurerule/",
            {"action": "delete_selected", "_selected_action": [str(quota.pk)], "post": "yes"},
        )
    assert response.status_code == 302 and not FailureRule.objects.filter(pk=quota.pk).exists()
    assert category() == "other"


@pytest.mark.django_db(transaction=True, serialized_rollback=True)  # the default rules come back afterwards
def test_a_celery_worker_recategorises_the_committed_records(world: dict[str, Any], celery_worker_process: str) -> None:
    from results.tasks import failures_recategorize_task

    records_store(records=[failed(world, QUOTA)])
    rule("quota exceeded", "permission", 1000)
    assert failures_recategorize_task.apply_async(queue=celery_worker_process).get(timeout=60) == 1
    assert category() == "permission"
