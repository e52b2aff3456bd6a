"""Which activity a record counts for (results.store.attribution): the rules, and re-attribution when the plan changes,
each checked on the targets' numbers and on rollups equal to a rebuild from the records."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from rest_framework.test import APIClient

from challenges.documents import PlanDocumentError
from challenges.models import Activity, Challenge, Target
from challenges.plan import plan_export, plan_import
from results.models import TransferRecord
from results.services import record_rows_store
from results.store.attribution import Scope, attribution_status, records_reattribute, scope_everything
from results.store.rollups import rollups_rebuild
from results.store.rows import RecordRow
from results.targets.rates import target_rates
from sites.models import Experiment, Site
from sites.roles import membership_grant
from tests.sites.factories import UserFactory

from .link_rows import assert_unions_as_rebuilt
from .rollup_rows import rollup_rows

pytestmark = pytest.mark.django_db

T0 = datetime(2024, 2, 12, tzinfo=UTC)
MB = 10**6
_ids = itertools.count()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def world() -> dict[str, Any]:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    cern, cnaf, bnl = (
        Site.objects.create(name="CERN", tier=0, country="CH"),
        Site.objects.create(name="CNAF", tier=1, country="IT"),
        Site.objects.create(name="BNL", tier=1, country="US"),
    )
    for site in (cern, cnaf, bnl):
        site.experiments.set([atlas, cms])
    challenge = Challenge.objects.create(
        name="DC24", slug="dc24", start=T0, end=T0 + timedelta(days=7), max_window=60, stable_window=120
    )
    return {"atlas": atlas, "cms": cms, "cern": cern, "cnaf": cnaf, "bnl": bnl, "challenge": challenge}


def activity(
    world: dict[str, Any],
    *,
    name: str,
    start: float = 0,
    end: float = 60,
    ddm: list[str] | None = None,
    experiment: str = "atlas",
    site: str = "cnaf",
    direction: str = "in",
    challenge: Challenge | None = None,
) -> Target:
    made = Activity.objects.create(
        challenge=challenge or world["challenge"],
        name=name,
        experiment=world[experiment],
        mode="T0 export",
        kind="transfer",
        start=at(start),
        end=at(end),
        ddm_activities=ddm or [],
    )
    return Target.objects.create(activity=made, site=world[site], direction=direction, rate=100 * MB)


def row(world: dict[str, Any], *, minute: float, ddm: str = "", size: int = 60 * MB, **extra: Any) -> RecordRow:
    """One ingested FTS transfer CERN -> CNAF of a minute."""
    values: dict[str, Any] = {
        "experiment_id": world["atlas"].pk,
        "source_site_id": world["cern"].pk,
        "destination_site_id": world["cnaf"].pk,
        "bytes": size,
        "start": at(minute),
        "end": at(minute + 1),
        "state": "ok",
        "origin": "fts",
        "origin_id": f"fts-{next(_ids)}",
        "ddm_activity": ddm,
    }
    return RecordRow(**{**values, **extra})


def volume(target: Target) -> float:
    target.refresh_from_db()
    return target_rates(target=target, max_window=60, stable_window=60).volume


def assert_rollups_as_rebuilt() -> None:
    """The rollups (and the matrix's unions) kept incrementally equal those rebuilt from the records."""
    assert_unions_as_rebuilt()
    kept = {name: sorted(rows, key=repr) for name, rows in rollup_rows().items()}
    rollups_rebuild()
    rebuilt = {name: sorted(rows, key=repr) for name, rows in rollup_rows().items()}
    assert kept.keys() == rebuilt.keys()
    for name, rows in kept.items():
        assert [r[:-3] for r in rows] == [r[:-3] for r in rebuilt[name]], name
        assert [r[-3:] for r in rows] == [pytest.approx(r[-3:]) for r in rebuilt[name]], name


def test_two_activities_at_one_site_show_only_their_own_traffic(world: dict[str, Any]) -> None:
    export = activity(world, name="ATLAS export", ddm=["T0 Export"])
    functional = activity(world, name="ATLAS functional", ddm=["Functional Test"])
    record_rows_store(
        rows=[row(world, minute=m, ddm="T0 Export") for m in range(10)]
        + [row(world, minute=m, ddm="functional test", size=6 * MB) for m in range(5)]  # names match ignoring case
        + [row(world, minute=m, ddm="User Subscriptions") for m in range(3)]  # neither's
    )
    assert volume(export) == 10 * 60 * MB
    assert volume(functional) == 5 * 6 * MB
    assert TransferRecord.objects.filter(activity__isnull=True).count() == 3
    assert_rollups_as_rebuilt()


def test_an_activity_that_takes_any_name_gets_what_a_named_one_does_not(world: dict[str, Any]) -> None:
    named = activity(world, name="export", ddm=["T0 Export"])
    anything = activity(world, name="everything else")
    record_rows_store(rows=[row(world, minute=1, ddm="T0 Export"), row(world, minute=2, ddm="Express")])
    assert (volume(named), volume(anything)) == (60 * MB, 60 * MB)


def test_other_experiments_other_flows_and_other_times_count_for_nothing(world: dict[str, Any]) -> None:
    target = activity(world, name="export", start=0, end=60)
    record_rows_store(
        rows=[
            row(world, minute=5, experiment_id=world["cms"].pk),  # CMS: not an ATLAS activity's
            row(world, minute=5, destination_site_id=world["bnl"].pk),  # into BNL: no target on that flow
            row(world, minute=90),  # after the window
            row(world, minute=5, experiment_id=None),  # no experiment
        ]
    )
    assert volume(target) == 0
    assert not TransferRecord.objects.filter(activity__isnull=False).exists()


def test_two_challenges_overlapping_at_a_site_do_not_see_each_others_traffic(world: dict[str, Any]) -> None:
    other = Challenge.objects.create(name="Other", slug="other", start=T0, end=T0 + timedelta(days=1))
    ours = activity(world, name="ours", ddm=["Data Challenge"])
    theirs = activity(world, name="theirs", ddm=["Functional Test"], challenge=other)
    record_rows_store(rows=[row(world, minute=1, ddm="Data Challenge")])
    assert (volume(ours), volume(theirs)) == (60 * MB, 0)


def test_claimed_twice_a_record_counts_once_by_the_written_order(world: dict[str, Any]) -> None:
    week = activity(world, name="week", start=0, end=600)
    hour = activity(world, name="hour", start=0, end=60)
    link = Activity.objects.create(
        challenge=world["challenge"],
        name="link",
        experiment=world["atlas"],
        mode="T0 export",
        kind="transfer",
        start=at(0),
        end=at(600),
    )
    on_link = Target.objects.create(activity=link, link_from=world["cern"], link_to=world["cnaf"], rate=MB)
    record_rows_store(rows=[row(world, minute=10), row(world, minute=100)])
    # Minute 10: all three claim it; a link target comes before site targets. Minute 100: link and week; link.
    assert (volume(on_link), volume(week), volume(hour)) == (120 * MB, 0, 0)
    on_link.delete()  # (re-attributed on commit; here by hand)
    records_reattribute(scope=Scope(activity_ids={link.pk}))
    assert (volume(week), volume(hour)) == (60 * MB, 60 * MB)  # minute 10: the shorter window
    assert_rollups_as_rebuilt()


def test_a_record_across_the_edge_counts_for_the_window_that_holds_its_middle(world: dict[str, Any]) -> None:
    first = activity(world, name="first", start=0, end=60)
    second = activity(world, name="second", start=60, end=120)
    record_rows_store(rows=[row(world, minute=59.5, size=60 * MB), row(world, minute=58.8, size=60 * MB)])
    # 59.5-60.5: middle at 60.0, in the second; 58.8-59.8: middle in the first. Only the part inside counts.
    assert volume(first) == pytest.approx(60 * MB)  # the whole of 58.8-59.8
    assert volume(second) == pytest.approx(30 * MB)  # the half of 59.5-60.5 inside its window; not the first's


def test_changing_the_plan_moves_the_records_and_their_rollups(world: dict[str, Any]) -> None:
    export = activity(world, name="export", ddm=["T0 Export"])
    functional = activity(world, name="functional", ddm=["Functional Test"])
    record_rows_store(rows=[row(world, minute=m, ddm="T0 Export") for m in range(4)])
    assert (volume(export), volume(functional)) == (240 * MB, 0)

    functional.activity.ddm_activities = ["Functional Test", "T0 Export"]
    functional.activity.save()
    export.activity.ddm_activities = ["Express"]
    export.activity.save()
    changed = records_reattribute(scope=Scope(activity_ids={export.activity_id, functional.activity_id}))
    assert changed == 4
    assert (volume(export), volume(functional)) == (0, 240 * MB)
    assert attribution_status() is not None and attribution_status()["state"] == "finished"  # type: ignore[index]
    assert records_reattribute(scope=scope_everything()) == 0  # idempotent
    assert_rollups_as_rebuilt()


def test_a_saved_activity_sends_the_reattribution_on_commit(
    world: dict[str, Any], tasks_run_here: None, django_capture_on_commit_callbacks: Any
) -> None:
    export = activity(world, name="export", ddm=["T0 Export"])
    record_rows_store(rows=[row(world, minute=1, ddm="Express")])
    assert volume(export) == 0
    with django_capture_on_commit_callbacks(execute=True):
        export.activity.ddm_activities = []
        export.activity.save()
    assert volume(export) == 60 * MB


def test_a_deleted_activity_leaves_its_records_to_the_others(
    world: dict[str, Any], tasks_run_here: None, django_capture_on_commit_callbacks: Any
) -> None:
    short = activity(world, name="short", start=0, end=30)
    long = activity(world, name="long", start=0, end=60)
    record_rows_store(rows=[row(world, minute=5)])
    assert (volume(short), volume(long)) == (60 * MB, 0)
    with django_capture_on_commit_callbacks(execute=True):
        short.activity.delete()
    assert volume(long) == 60 * MB
    assert_rollups_as_rebuilt()


def test_a_plan_document_import_reattributes(
    world: dict[str, Any], tasks_run_here: None, django_capture_on_commit_callbacks: Any
) -> None:
    export = activity(world, name="export", ddm=["T0 Export"])
    record_rows_store(rows=[row(world, minute=1, ddm="Data Challenge")])
    document = plan_export(challenge=world["challenge"])
    assert document["activities"][0]["ddm_activities"] == ["T0 Export"]
    document["activities"][0]["ddm_activities"] = ["T0 Export", "Data Challenge"]
    with django_capture_on_commit_callbacks(execute=True):
        plan_import(document=document)
    assert volume(export) == 60 * MB


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("T0 Export", "must be a list"),
        (["T0 Export", "t0 export"], "given twice"),
        ([" T0 Export"], "no spaces at the ends"),
        (["x" * 65], "at most 64 characters"),
        ([""], "non-empty string"),
        ([f"a{n}" for n in range(21)], "at most 20"),
    ],
)
def test_bad_ddm_activity_names_are_refused_with_the_reason(world: dict[str, Any], names: Any, message: str) -> None:
    activity(world, name="export")
    document = plan_export(challenge=world["challenge"])
    document["activities"][0]["ddm_activities"] = names
    with pytest.raises(PlanDocumentError) as raised:
        plan_import(document=document)
    assert message in str(raised.value.errors), raised.value.errors
    assert Activity.objects.get().ddm_activities == []  # nothing changed


def test_the_api_takes_and_checks_ddm_activities(world: dict[str, Any]) -> None:
    user = UserFactory(username="coordinator")
    membership_grant(user=user, role="coordinator")
    client = APIClient()
    client.force_authenticate(user)
    export = activity(world, name="export")
    url = f"/api/v1/activities/{export.activity_id}/"
    response = client.patch(url, {"ddm_activities": ["T0 Export", "Data Challenge"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["ddm_activities"] == ["T0 Export", "Data Challenge"]
    response = client.patch(url, {"ddm_activities": ["T0 Export", "T0 EXPORT"]}, format="json")
    assert response.status_code == 400
    assert "given twice" in orjson.dumps(response.json()).decode()
    export.activity.refresh_from_db()
    assert export.activity.ddm_activities == ["T0 Export", "Data Challenge"]


def test_the_about_page_writes_the_rules_and_the_last_reattribution(world: dict[str, Any], client: Any) -> None:
    client.force_login(UserFactory(username="viewer"))
    records_reattribute(scope=scope_everything() or Scope(activity_ids={0}))
    text = client.get("/results/about/numbers/").content.decode()
    assert "Which transfers count for which activity" in text
    assert "a link target before a" in text
    assert "Last re-attribution of records to activities: 0 of 0 records moved" in text


def test_attributing_every_record_at_once_gives_what_the_writer_gave(world: dict[str, Any]) -> None:
    from results.store.attribution import records_attribute_all_sql

    export = activity(world, name="export", ddm=["T0 Export"])
    anything = activity(world, name="anything")
    record_rows_store(rows=[row(world, minute=1, ddm="T0 Export"), row(world, minute=2, ddm="Express")])
    given = dict(TransferRecord.objects.values_list("origin_id", "activity_id"))
    assert set(given.values()) == {export.activity_id, anything.activity_id}
    TransferRecord.objects.update(activity=None)
    assert records_attribute_all_sql() == 2
    assert dict(TransferRecord.objects.values_list("origin_id", "activity_id")) == given
    assert records_attribute_all_sql() == 0
