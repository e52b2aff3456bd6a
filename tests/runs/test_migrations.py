"""A database that has runs and records from before the runs app upgrades with its rows and links intact."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("challenges", "0005_runfile_progress"), ("results", "0008_record_indexes_covered")]


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_runs_files_and_their_records_move_to_the_runs_app_with_their_rows() -> None:
    executor = _migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    experiment = old.get_model("sites", "Experiment").objects.create(name="MIGRATE-EXP")
    start, end = datetime(2026, 5, 1, 12, tzinfo=UTC), datetime(2026, 5, 8, 12, tzinfo=UTC)
    challenge = old.get_model("challenges", "Challenge").objects.create(name="m", slug="migrate", start=start, end=end)
    activity = old.get_model("challenges", "Activity").objects.create(
        challenge=challenge, name="export", experiment=experiment, mode="DT", kind="transfer", start=start, end=end
    )
    run = old.get_model("challenges", "Run").objects.create(activity=activity, kind="transfer", state="finished")
    old.get_model("challenges", "RunFile").objects.create(
        run=run, index=0, source_url="root://a//f", destination_url="root://b//f", size=7, state="done", bytes=7
    )
    old.get_model("results", "TransferRecord").objects.create(
        experiment=experiment, bytes=7, start=start, end=end, state="ok", origin="probe", origin_id="m-0", run=run
    )

    executor = _migrate(executor.loader.graph.leaf_nodes())

    new = executor.loader.project_state(executor.loader.graph.leaf_nodes()).apps
    moved = new.get_model("runs", "Run").objects.get(pk=run.pk)
    assert moved.activity_id == activity.pk
    assert list(new.get_model("runs", "RunFile").objects.filter(run=moved).values_list("bytes", flat=True)) == [7]
    assert new.get_model("results", "TransferRecord").objects.get(origin_id="m-0").run_id == run.pk
    with connection.cursor() as cursor:
        tables = set(connection.introspection.table_names(cursor))
    assert {"runs_run", "runs_runfile"} <= tables
    assert not {"challenges_run", "challenges_runfile"} & tables
    content_type = new.get_model("contenttypes", "ContentType")
    assert not content_type.objects.filter(app_label="challenges", model__in=["run", "runfile"]).exists()
