"""results 0014 turns a populated records table into monthly partitions with its rows, ids and identities, and
going back makes one plain table again with 0010's unique constraints."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("results", "0013_link_intervals")]
AFTER = [("results", "0015_record_origin_end")]


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def _partitions() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'results_transferrecord'::regclass"
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_populated_table_is_partitioned_with_its_rows_and_back() -> None:
    executor = _migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    experiment = old.get_model("sites", "Experiment").objects.create(name="PARTITION-EXP")
    record = old.get_model("results", "TransferRecord")
    ends = [datetime(2025, 1, 31, 23, 59, tzinfo=UTC), datetime(2025, 2, 1, 0, 0, tzinfo=UTC)]
    rows = [
        record.objects.create(
            experiment=experiment,
            bytes=10 + index,
            start=datetime(2025, 1, 31, 23, tzinfo=UTC),
            end=end,
            state="ok",
            origin="fts",
            origin_id=f"p-{index}",
            transfer_key=f"key-{index}",
        )
        for index, end in enumerate(ends)
    ]

    executor = _migrate(AFTER)
    assert {"results_transferrecord_y2025m01", "results_transferrecord_y2025m02"} <= _partitions()
    new = executor.loader.project_state(AFTER).apps.get_model("results", "TransferRecord")
    assert sorted(new.objects.values_list("id", "bytes")) == sorted((row.pk, row.bytes) for row in rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM results_recordkey")
        assert cursor.fetchone()[0] == 4  # an origin key and a transfer key per record
    later = new.objects.create(
        experiment_id=experiment.pk, bytes=1, start=ends[0], end=ends[1], state="ok", origin="fts", origin_id="p-9"
    )
    assert later.pk > max(row.pk for row in rows)  # the identity goes on after the old table's ids

    executor = _migrate(BEFORE)
    assert _partitions() == set()
    back = executor.loader.project_state(BEFORE).apps.get_model("results", "TransferRecord")
    assert back.objects.count() == 3
    with pytest.raises(IntegrityError), transaction.atomic():
        back.objects.create(
            experiment_id=experiment.pk,
            bytes=1,
            start=ends[0],
            end=ends[0],
            state="ok",
            origin="fts",
            origin_id="p-0",
        )
    _migrate(executor.loader.graph.leaf_nodes())
