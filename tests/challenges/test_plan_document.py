"""The plan document: loading (JSON, YAML), validation by the planning rules with every problem at its place,
import all or nothing and in place by slug, export in the same shape, and the load_challenge / export_challenge
commands."""

from __future__ import annotations

import copy
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import ManagementUtility, call_command
from django.core.management.base import CommandError

from challenges.documents import PlanDocumentError, plan_document_load, plan_document_validate
from challenges.models import Activity, Challenge, Target
from challenges.plan import plan_export, plan_import
from tests.sites.factories import ExperimentFactory, SiteFactory

from .factories import ActivityFactory, ChallengeFactory, TargetFactory

pytestmark = pytest.mark.django_db

MODELS = (Challenge, Activity, Target)


@pytest.fixture(autouse=True)
def registry() -> None:
    """The sites and experiments the example names: CERN serves both, CNAF and BNL ATLAS, KIT CMS; and the
    earlier challenge it compares with."""
    atlas, cms = ExperimentFactory(name="ATLAS"), ExperimentFactory(name="CMS")
    SiteFactory(name="CERN", experiments=[atlas, cms])
    SiteFactory(name="CNAF", experiments=[atlas])
    SiteFactory(name="BNL", experiments=[atlas])
    SiteFactory(name="KIT", experiments=[cms])
    ChallengeFactory(slug="tc21", name="Tape Challenge 2021")


def example() -> dict[str, Any]:
    return {
        "name": "Tape Challenge 2022",
        "slug": "tc22",
        "start": "2022-03-07T00:00:00Z",
        "end": "2022-03-26T00:00:00Z",
        "max_window": 3600,
        "stable_window": 18000,
        "description": "...",
        "compare_with": "tc21",
        "activities": [
            {
                "name": "ATLAS DT",
                "experiment": "ATLAS",
                "mode": "DT",
                "kind": "tape-write",
                "start": "2022-03-14T00:00:00Z",
                "end": "2022-03-19T00:00:00Z",
                "source": "CERN",
                "file_size": 5000000000,
                "file_count": 1000,
                "concurrency": 100,
                "copy_mode": "pull",
                "auto_run": False,
                "targets": [
                    {"site": "CNAF", "direction": "in", "rate": 3.5e9},
                    {"link": {"from": "CERN", "to": "BNL"}, "rate": 3.5e9},
                ],
            },
            {
                "name": "CMS A-DT",
                "experiment": "CMS",
                "mode": "A-DT",
                "kind": "staging",
                "start": "2022-03-07T00:00:00Z",
                "end": "2022-03-12T00:00:00Z",
                "targets": [
                    {
                        "site": "KIT",
                        "direction": "out",
                        "rate": 0.29e9,
                        "nominal_rate": 0.0967e9,
                        "factors": {"headroom": 1.5, "efficiency": 2},
                    }
                ],
            },
        ],
    }


def many_error_document() -> dict[str, Any]:
    """Ten distinct problems around an otherwise valid plan."""
    document = example()
    document.update(name="", slug="tc 22", start="2022-03-07T00:00:00", colour="red")
    atlas = document["activities"][0]
    atlas.update(experiment="LHCb", kind="tape")
    atlas["targets"][0]["site"] = "NOWHERE"
    atlas["targets"][1]["rate"] = -1
    document["activities"][1].update(name="ATLAS DT", end="2022-03-06T00:00:00Z")
    return document


MANY_ERROR_PLACES = [
    "colour",
    "name",
    "slug",
    "start",
    "activities[0].experiment",
    "activities[0].kind",
    "activities[0].targets[0].site",
    "activities[0].targets[1].rate",
    "activities[1].name",
    "activities[1].end",
]


def many_activities_document(count: int) -> dict[str, Any]:
    document = example()
    template = document["activities"][0]
    document["activities"] = [{**copy.deepcopy(template), "name": f"ATLAS DT {index}"} for index in range(count)]
    return document


def row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in MODELS}


def errors_of(document: dict[str, Any]) -> list[dict[str, str]]:
    with pytest.raises(PlanDocumentError) as caught:
        plan_import(document=document)
    return caught.value.errors


def places_of(document: dict[str, Any]) -> list[str]:
    return [error["place"] for error in errors_of(document)]


def exported() -> dict[str, Any]:
    return plan_export(challenge=Challenge.objects.get(slug="tc22"))


def normalized(document: dict[str, Any]) -> dict[str, Any]:
    """A document with the defaults filled in and the lists in export order, to compare documents."""
    result = copy.deepcopy(document)
    result.setdefault("max_window", 3600)
    result.setdefault("stable_window", 18000)
    for activity in result["activities"]:
        activity.setdefault("auto_run", False)
        activity["targets"].sort(key=lambda target: json.dumps(target, sort_keys=True))
    result["activities"].sort(key=lambda activity: activity["name"])
    return result


# Import


def test_the_example_document_imports_every_part() -> None:
    plan_import(document=example())

    challenge = Challenge.objects.get(slug="tc22")
    assert (challenge.name, challenge.start, challenge.compare_with.slug) == (  # type: ignore[union-attr]
        "Tape Challenge 2022",
        datetime(2022, 3, 7, tzinfo=UTC),
        "tc21",
    )
    atlas = challenge.activities.get(name="ATLAS DT")
    assert (atlas.experiment.name, atlas.kind, atlas.source.name, atlas.file_size, atlas.concurrency) == (  # type: ignore[union-attr]
        "ATLAS",
        "tape-write",
        "CERN",
        5_000_000_000,
        100,
    )
    assert sorted(target.place for target in atlas.targets.all()) == ["CERN -> BNL", "CNAF in"]
    kit = Target.objects.get(activity__name="CMS A-DT")
    assert (kit.site.name, kit.direction, kit.rate, kit.nominal_rate) == ("KIT", "out", 0.29e9, 0.0967e9)  # type: ignore[union-attr]
    assert kit.factors == {"headroom": 1.5, "efficiency": 2}


def test_the_first_import_reports_what_it_created() -> None:
    summary = plan_import(document=example())

    assert summary.as_dict() == {
        "challenge": {"created": 1, "updated": 0, "deleted": 0},
        "activities": {"created": 2, "updated": 0, "deleted": 0},
        "targets": {"created": 3, "updated": 0, "deleted": 0},
    }
    assert str(summary).startswith("challenge: 1 created, 0 updated, 0 deleted; activities: 2 created")


def test_a_reimport_of_the_same_slug_updates_the_challenge_in_place() -> None:
    plan_import(document=example())
    challenge_pk = Challenge.objects.get(slug="tc22").pk
    activity_pk = Activity.objects.get(name="ATLAS DT").pk
    document = example()
    document["name"] = "Tape Challenge 2022, second round"
    document["activities"][0]["concurrency"] = 40

    plan_import(document=document)

    challenge = Challenge.objects.get(slug="tc22")
    assert (challenge.pk, challenge.name) == (challenge_pk, "Tape Challenge 2022, second round")
    assert Activity.objects.get(name="ATLAS DT").pk == activity_pk
    assert Activity.objects.get(name="ATLAS DT").concurrency == 40


def test_a_reimport_of_the_same_document_creates_no_duplicates() -> None:
    plan_import(document=example())
    before = row_counts()

    summary = plan_import(document=example())

    assert row_counts() == before
    assert summary.as_dict() == {
        "challenge": {"created": 0, "updated": 1, "deleted": 0},
        "activities": {"created": 0, "updated": 2, "deleted": 0},
        "targets": {"created": 0, "updated": 3, "deleted": 0},
    }


def test_an_activity_absent_from_the_reimport_is_deleted_with_its_targets() -> None:
    plan_import(document=example())
    document = example()
    del document["activities"][1]

    summary = plan_import(document=document)

    assert list(Activity.objects.filter(challenge__slug="tc22").values_list("name", flat=True)) == ["ATLAS DT"]
    assert not Target.objects.filter(site__name="KIT").exists()
    assert (summary.activities.deleted, summary.targets.deleted) == (1, 1)


def test_a_reimport_replaces_an_activity_s_targets_by_the_document_s() -> None:
    plan_import(document=example())
    document = example()
    document["activities"][0]["targets"] = [{"site": "BNL", "direction": "in", "rate": 1e9}]

    summary = plan_import(document=document)

    assert [target.place for target in Activity.objects.get(name="ATLAS DT").targets.all()] == ["BNL in"]
    assert (summary.targets.created, summary.targets.deleted) == (1, 2)


def test_the_import_leaves_other_challenges_alone() -> None:
    other = ActivityFactory.create(challenge=ChallengeFactory(slug="other"), name="ATLAS DT")
    TargetFactory(activity=other)

    plan_import(document=example())

    assert Activity.objects.filter(challenge__slug="other").count() == 1
    assert Target.objects.filter(activity=other).count() == 1


def test_a_rate_left_out_is_derived_from_the_nominal_rate_and_factors() -> None:
    document = example()
    del document["activities"][1]["targets"][0]["rate"]

    plan_import(document=document)

    assert Target.objects.get(site__name="KIT").rate == pytest.approx(0.0967e9 * 1.5 * 2)


def test_a_target_without_rate_or_nominal_rate_is_rejected() -> None:
    document = example()
    del document["activities"][0]["targets"][0]["rate"]

    assert errors_of(document) == [
        {"place": "activities[0].targets[0].rate", "error": "required unless nominal_rate is given"}
    ]


def test_times_with_an_offset_are_stored_and_exported_in_utc() -> None:
    document = example()
    document["activities"][0]["start"] = "2022-03-14T01:00:00+01:00"

    plan_import(document=document)

    assert Activity.objects.get(name="ATLAS DT").start == datetime(2022, 3, 14, tzinfo=UTC)
    assert exported()["activities"][1]["start"] == "2022-03-14T00:00:00Z"


def test_the_experiment_is_found_ignoring_case() -> None:
    document = example()
    document["activities"][1]["experiment"] = "cms"

    plan_import(document=document)

    assert Activity.objects.get(name="CMS A-DT").experiment.name == "CMS"


# Round trip


def test_export_after_import_gives_the_document_back_with_defaults_filled_in() -> None:
    plan_import(document=example())

    assert normalized(exported()) == normalized(example())


def test_export_import_export_is_identical() -> None:
    plan_import(document=example())
    first = exported()

    plan_import(document=json.loads(json.dumps(first)))

    assert exported() == first


def test_export_uses_utc_times_with_a_z_and_leaves_out_empty_optionals() -> None:
    document = example()
    del document["description"], document["compare_with"]
    plan_import(document=document)

    result = exported()

    assert (result["start"], result["end"]) == ("2022-03-07T00:00:00Z", "2022-03-26T00:00:00Z")
    assert "description" not in result
    assert "compare_with" not in result
    assert set(result["activities"][0]) == {"name", "experiment", "mode", "kind", "start", "end", "auto_run", "targets"}


def test_export_takes_a_constant_number_of_queries(django_assert_num_queries: Any) -> None:
    plan_import(document=many_activities_document(20))
    challenge = Challenge.objects.get(slug="tc22")

    with django_assert_num_queries(3):  # the challenge to compare with, the activities, their targets
        plan_export(challenge=challenge)


def test_validation_takes_a_constant_number_of_queries(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(4):  # experiments, sites, which sites serve what, the challenge to compare with
        plan_document_validate(document=many_activities_document(20))


def test_import_queries_do_not_grow_with_the_number_of_activities(django_assert_max_num_queries: Any) -> None:
    plan_import(document=many_activities_document(2))
    with django_assert_max_num_queries(30) as few:
        plan_import(document=many_activities_document(3))
    with django_assert_max_num_queries(len(few.captured_queries)):
        plan_import(document=many_activities_document(30))


# Loading


def test_a_yaml_document_imports_like_its_json() -> None:
    text = yaml.safe_dump(example(), sort_keys=False)

    plan_import(document=plan_document_load(text=text, content_type="application/yaml"))

    assert normalized(exported()) == normalized(example())


def test_yaml_with_unquoted_timestamps_is_recognised_without_a_content_type() -> None:
    text = (
        "name: Small\nslug: tc22\nstart: 2022-03-07T00:00:00Z\nend: 2022-03-26T00:00:00Z\nactivities:\n"
        "  - {name: KIT recall, experiment: CMS, mode: A-DT, kind: staging,\n"
        "     start: 2022-03-07T00:00:00Z, end: 2022-03-08T00:00:00Z,\n"
        "     targets: [{site: KIT, direction: out, rate: 2.9e+8}]}\n"
    )

    plan_import(document=plan_document_load(text=text))

    assert Target.objects.get(activity__name="KIT recall").rate == 2.9e8


def test_unparsable_json_is_a_document_error_with_its_position() -> None:
    with pytest.raises(PlanDocumentError) as caught:
        plan_document_load(text=b'{"activities": [}', content_type="application/json")

    assert caught.value.errors[0]["place"] == "document"
    assert "column 17" in caught.value.errors[0]["error"]


def test_a_document_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(PlanDocumentError) as caught:
        plan_document_load(text="[1, 2]")

    assert caught.value.errors[0]["place"] == "document"


# Every problem at its place, nothing stored


def test_a_document_with_many_errors_lists_every_one_with_its_place() -> None:
    errors = errors_of(many_error_document())

    assert [error["place"] for error in errors] == MANY_ERROR_PLACES
    assert all(error["error"] for error in errors)


def test_a_document_with_errors_stores_nothing() -> None:
    plan_import(document=example())
    before, stored = row_counts(), exported()
    document = many_error_document()
    document["slug"] = "tc22"  # an update of a stored challenge, refused as a whole
    document["activities"].append({**example()["activities"][1], "name": "valid"})

    errors_of(document)

    assert row_counts() == before
    assert exported() == stored


# One rule each


def test_a_challenge_ending_before_it_starts_is_rejected() -> None:
    document = example()
    document["end"] = "2022-03-01T00:00:00Z"

    errors = errors_of(document)

    assert errors[0] == {"place": "end", "error": "the end must be after the start"}


def test_an_activity_ending_before_it_starts_is_rejected() -> None:
    document = example()
    document["activities"][0]["end"] = "2022-03-13T00:00:00Z"

    assert errors_of(document) == [{"place": "activities[0].end", "error": "the end must be after the start"}]


def test_an_activity_outside_its_challenge_is_rejected() -> None:
    document = example()
    document["activities"][0]["end"] = "2022-03-27T00:00:00Z"

    assert errors_of(document) == [
        {"place": "activities[0].end", "error": "after the challenge ends (2022-03-26 00:00 UTC)"}
    ]


def test_a_source_that_does_not_serve_the_experiment_is_rejected() -> None:
    document = example()
    document["activities"][0]["source"] = "KIT"

    assert errors_of(document) == [{"place": "activities[0].source", "error": "KIT does not serve ATLAS"}]


def test_a_target_site_that_does_not_serve_the_experiment_is_rejected() -> None:
    document = example()
    document["activities"][0]["targets"][0]["site"] = "KIT"

    assert errors_of(document) == [{"place": "activities[0].targets[0].site", "error": "KIT does not serve ATLAS"}]


def test_a_link_end_that_does_not_serve_the_experiment_is_rejected() -> None:
    document = example()
    document["activities"][0]["targets"][1]["link"]["to"] = "KIT"

    assert errors_of(document) == [{"place": "activities[0].targets[1].link.to", "error": "KIT does not serve ATLAS"}]


@pytest.mark.parametrize("rate", [0, -3.5e9])
def test_a_rate_that_is_not_positive_is_rejected(rate: float) -> None:
    document = example()
    document["activities"][0]["targets"][0]["rate"] = rate

    assert errors_of(document) == [
        {"place": "activities[0].targets[0].rate", "error": "a positive number of bytes per second"}
    ]


def test_a_second_target_for_the_same_site_and_direction_is_rejected() -> None:
    document = example()
    document["activities"][0]["targets"].append({"site": "CNAF", "direction": "in", "rate": 1e9})

    assert errors_of(document) == [
        {
            "place": "activities[0].targets[2].site",
            "error": "a second target for the same site; see activities[0].targets[0]",
        }
    ]


def test_a_second_target_for_the_same_link_is_rejected() -> None:
    document = example()
    document["activities"][0]["targets"].append({"link": {"from": "CERN", "to": "BNL"}, "rate": 1e9})

    assert places_of(document) == ["activities[0].targets[2].link"]


def test_the_same_site_in_the_other_direction_is_not_a_duplicate() -> None:
    document = example()
    document["activities"][0]["targets"].append({"site": "CNAF", "direction": "out", "rate": 1e9})

    plan_import(document=document)

    assert Target.objects.filter(site__name="CNAF").count() == 2


def test_a_rate_that_disagrees_with_its_derivation_is_rejected() -> None:
    document = example()
    document["activities"][1]["targets"][0]["rate"] = 0.5e9

    assert errors_of(document) == [
        {"place": "activities[1].targets[0].rate", "error": "5e+08 B/s differs from nominal x factors = 2.901e+08 B/s"}
    ]


def test_a_time_without_a_timezone_is_rejected() -> None:
    document = example()
    document["activities"][1]["start"] = "2022-03-07T00:00:00"

    errors = errors_of(document)

    assert [error["place"] for error in errors] == ["activities[1].start"]
    assert "timezone" in errors[0]["error"]


def test_an_unknown_site_is_rejected_at_its_place() -> None:
    document = example()
    document["activities"][0]["targets"][1]["link"]["from"] = "NOWHERE"

    assert errors_of(document) == [
        {"place": "activities[0].targets[1].link.from", "error": "no site named 'NOWHERE' in the registry"}
    ]


def test_an_unknown_experiment_is_rejected_at_its_place() -> None:
    document = example()
    document["activities"][1]["experiment"] = "LHCb"

    assert errors_of(document) == [
        {"place": "activities[1].experiment", "error": "no experiment named 'LHCb' in the registry"}
    ]


def test_two_activities_with_the_same_name_are_rejected() -> None:
    document = example()
    document["activities"][1]["name"] = "ATLAS DT"

    assert errors_of(document) == [{"place": "activities[1].name", "error": "'ATLAS DT' repeats activities[0].name"}]


def test_a_slug_with_spaces_is_rejected() -> None:
    document = example()
    document["slug"] = "tape challenge"

    assert places_of(document) == ["slug"]


def test_unknown_keys_are_rejected_at_every_level() -> None:
    document = example()
    document["activities"][0]["colour"] = "red"
    document["activities"][0]["targets"][1]["link"]["via"] = "GEANT"

    assert places_of(document) == ["activities[0].colour", "activities[0].targets[1].link.via"]


def test_a_comparison_with_an_unknown_challenge_is_rejected() -> None:
    document = example()
    document["compare_with"] = "tc19"

    assert errors_of(document) == [{"place": "compare_with", "error": "no challenge with the slug 'tc19'"}]


def test_a_link_target_with_a_direction_is_rejected() -> None:
    document = example()
    document["activities"][0]["targets"][1]["direction"] = "in"

    assert places_of(document) == ["activities[0].targets[1].direction"]


def test_a_target_with_neither_site_nor_link_is_rejected_at_the_target() -> None:
    document = example()
    document["activities"][0]["targets"][0] = {"rate": 1e9}

    assert places_of(document) == ["activities[0].targets[0]"]


def test_missing_required_keys_are_each_reported() -> None:
    document = example()
    del document["start"], document["activities"][1]["kind"]

    assert places_of(document) == ["start", "activities[1].kind"]


# Commands


def test_the_load_command_fails_on_a_bad_file_and_prints_every_place(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(many_error_document()))
    stderr = io.StringIO()
    before = row_counts()

    with pytest.raises(CommandError, match="10 problems"):
        call_command("load_challenge", str(path), stderr=stderr)

    assert all(f"{place}: " in stderr.getvalue() for place in MANY_ERROR_PLACES)
    assert row_counts() == before


def test_the_load_command_exits_non_zero_on_a_bad_file(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(many_error_document()))

    with pytest.raises(SystemExit) as exit_info:
        ManagementUtility(["manage.py", "load_challenge", str(path)]).execute()

    assert exit_info.value.code == 1
    assert "activities[0].targets[1].rate: " in capsys.readouterr().err


def test_the_load_command_reads_a_yaml_file_and_prints_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(example()))
    stdout = io.StringIO()

    call_command("load_challenge", str(path), stdout=stdout)

    assert "activities: 2 created, 0 updated, 0 deleted" in stdout.getvalue()
    assert Challenge.objects.filter(slug="tc22").exists()


def test_the_load_command_reads_standard_input(monkeypatch: Any) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(example()).encode())))

    call_command("load_challenge", "-", stdout=io.StringIO())

    assert Activity.objects.filter(challenge__slug="tc22").count() == 2


def test_the_export_command_writes_yaml_that_loads_back(tmp_path: Path) -> None:
    plan_import(document=example())
    path = tmp_path / "out.yaml"

    call_command("export_challenge", "tc22", "--format", "yaml", "--output", str(path), stdout=io.StringIO())

    assert plan_document_load(text=path.read_text()) == exported()


def test_the_export_command_writes_json_to_standard_output() -> None:
    plan_import(document=example())
    stdout = io.StringIO()

    call_command("export_challenge", "tc22", stdout=stdout)

    assert json.loads(stdout.getvalue()) == exported()


def test_the_export_command_rejects_an_unknown_slug() -> None:
    with pytest.raises(CommandError, match="no challenge with the slug 'tc19'"):
        call_command("export_challenge", "tc19")


def test_a_repeating_auto_run_is_kept_and_needs_auto_run() -> None:
    document = example()
    document["activities"][0] |= {"auto_run": True, "auto_run_repeat": True}
    plan_import(document=document)
    name = document["activities"][0]["name"]
    assert next(a for a in exported()["activities"] if a["name"] == name)["auto_run_repeat"] is True
    document["activities"][0]["auto_run"] = False
    assert places_of(document) == ["activities[0].auto_run_repeat"]
