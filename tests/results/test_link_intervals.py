"""The matrix's stored unions (results.store.link_intervals, read by results.matrix.unions) give the same numbers as the
exact scan of the records (results.matrix.cells): on random overlapping intervals, records across the activities'
windows, ok / failed / cancelled, every selection the page offers; after the plan changes; kept by two writers at
once; and equal to a rebuild."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection, transaction

from challenges.models import Activity, Target
from results.matrix.challenge import matrix_for_challenge
from results.models import LinkInterval, LinkTotals, TransferRecord
from results.services import records_store
from results.store.attribution import records_reattribute, scope_everything
from results.store.link_intervals import link_intervals_add, link_intervals_settle
from results.store.rollups import ROLLUP_COLUMNS, rollup_add_sql

from .link_rows import assert_unions_as_rebuilt, link_rows
from .link_world import _ids, at, batches_stored_at_once, make_world, random_record


def rows(cells: list[Any]) -> list[dict[str, Any]]:
    return sorted((cell.as_row() for cell in cells), key=repr)


SELECTIONS = [
    {"mode": mode, "concurrency": concurrency, "split": split}
    for mode in (None, "pull", "")
    for concurrency in (None, 10)
    for split in ((), ("mode",), ("concurrency",), ("mode", "concurrency"))
]


def assert_unions_give_the_records_numbers(world: dict[str, Any]) -> None:
    """Every selection of the page (experiments, mode, concurrency, splits): the same cells, number for number."""
    cache.clear()
    checked = 0
    for experiments in (None, [world["atlas"].pk], [world["cms"].pk]):
        for selection in SELECTIONS:
            asked = {"challenge": world["challenge"], "experiment_ids": experiments, **selection}
            unions = matrix_for_challenge(**asked, resolution="unions")
            records = matrix_for_challenge(**asked, resolution="records")
            assert (unions.resolution, records.resolution) == ("unions", "records")
            assert rows(unions.cells) == rows(records.cells), (experiments, selection)
            assert (unions.modes, unions.concurrencies) == (records.modes, records.concurrencies)
            checked += len(unions.cells)
    assert checked > 30  # the selections are not empty


@pytest.mark.django_db
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_unions_give_the_exact_numbers_of_the_records_on_random_overlapping_transfers(seed: int) -> None:
    world = make_world()
    rng = random.Random(seed)
    for _ in range(8):  # batches, in no order of time
        records_store(records=[random_record(world, rng) for _ in range(rng.randrange(1, 80))])
    assert TransferRecord.objects.filter(activity__isnull=False).count() > 150
    assert_unions_give_the_records_numbers(world)
    assert_unions_as_rebuilt()


@pytest.mark.django_db
def test_the_unions_follow_the_records_when_the_plan_changes() -> None:
    world = make_world()
    rng = random.Random(7)
    records_store(records=[random_record(world, rng) for _ in range(300)])
    first, second, _ = world["activities"]
    Activity.objects.filter(pk=first.pk).update(end=at(30000))  # around the signals: re-attributed by hand below
    Target.objects.filter(activity=second, link_from=world["sites"][0]).delete()
    changed = records_reattribute(scope=scope_everything())
    assert changed > 20
    assert_unions_give_the_records_numbers(world)
    assert_unions_as_rebuilt()
    Activity.objects.filter(pk=second.pk).delete()
    records_reattribute(scope=scope_everything())
    assert_unions_give_the_records_numbers(world)
    assert_unions_as_rebuilt()


@pytest.mark.django_db
def test_a_most_common_error_tied_is_the_first_in_order_as_the_records_scan_gives_it() -> None:
    world = make_world()
    cern, cnaf, _ = world["sites"]

    def failed(message: str, start: float) -> TransferRecord:
        return TransferRecord(
            experiment=world["atlas"],
            source_site=cern,
            destination_site=cnaf,
            bytes=0,
            start=at(start),
            end=at(start + 10),
            state="failed",
            error_message=message,
            mode="pull",
            origin="fts",
            origin_id=f"e{next(_ids)}",
        )

    records_store(records=[failed("b timeout", 0), failed("a refused", 5)])
    records_store(records=[failed("b timeout", 100), failed("a refused", 200), failed("", 300), failed("", 400)])
    [unions] = matrix_for_challenge(challenge=world["challenge"], resolution="unions").cells
    [records] = matrix_for_challenge(challenge=world["challenge"], resolution="records").cells
    assert unions.top_error == records.top_error == "a refused"
    assert unions.active_seconds == records.active_seconds == 55.0  # [0, 15) and four of 10 s


@pytest.mark.django_db
def test_the_rebuild_command_restores_unions_that_a_bulk_load_left_out() -> None:
    world = make_world()
    rng = random.Random(3)
    records_store(records=[random_record(world, rng) for _ in range(100)])
    kept = link_rows()
    LinkTotals.objects.all().delete()
    LinkInterval.objects.all().delete()
    call_command("link_intervals_rebuild", stdout=None)
    assert link_rows() == kept


@pytest.mark.django_db
def test_records_deleted_leave_the_unions_of_those_that_stay() -> None:
    """Records taken out of the rollups and deleted (a run's, here): the islands they were part of are built again
    from the records that stay, the run leaves the cells' runs, and the numbers are the records' scan's."""
    world = make_world()
    rng = random.Random(5)
    records_store(records=[random_record(world, rng) for _ in range(300)])
    gone_run = world["runs"][0]
    assert TransferRecord.objects.filter(run=gone_run, activity__isnull=False).count() > 3
    with transaction.atomic():
        rollup_add_sql(
            records=f"SELECT {ROLLUP_COLUMNS} FROM results_transferrecord WHERE run_id = %s",
            params=[gone_run.pk],
            sign=-1,
        )
        TransferRecord.objects.filter(run=gone_run).delete()
        link_intervals_settle()
    assert all(gone_run.pk not in runs for runs in LinkTotals.objects.values_list("runs", flat=True))
    assert_unions_give_the_records_numbers(world)
    assert_unions_as_rebuilt()


# --- two writers at once: real connections ---------------------------------------------------------------------

INTERVALS = """
SELECT * FROM (VALUES {values}) AS v(activity_id, source_site_id, destination_site_id, mode, concurrency, state,
                                     start, "end", bytes, error_message, run_id)
"""


def _intervals(spans: list[tuple[float, float]]) -> str:
    values = ", ".join(
        f"(1::bigint, 2::bigint, 3::bigint, 'pull', NULL::int, 'ok', '{at(a).isoformat()}'::timestamptz, "
        f"'{at(b).isoformat()}'::timestamptz, 1::bigint, '', NULL::bigint)"
        for a, b in spans
    )
    return INTERVALS.format(values=values)


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_writers_of_one_link_at_once_lose_no_interval() -> None:
    """The first writer holds its transaction open; the second, on another connection, waits for it at the link's
    totals row, then merges with the islands the first committed: one island, not three overlapping ones."""
    first_added, first_may_commit = threading.Event(), threading.Event()
    finished: dict[str, float] = {}

    def first() -> None:
        with transaction.atomic():
            link_intervals_add(records=_intervals([(0, 10), (20, 30)]))
            first_added.set()
            first_may_commit.wait(10)
            finished["first"] = time.monotonic()
        connection.close()

    def second() -> None:
        first_added.wait(10)
        with transaction.atomic():
            link_intervals_add(records=_intervals([(5, 25)]))
        finished["second"] = time.monotonic()
        connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # the second writer is now waiting
    assert "second" not in finished
    first_may_commit.set()
    for thread in threads:
        thread.join(20)
    assert finished["second"] >= finished["first"]
    assert list(LinkInterval.objects.values_list("start", "end")) == [(at(0), at(30))]
    assert LinkTotals.objects.get().files_ok == 3


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_batches_stored_at_once_on_one_link_keep_the_unions_a_rebuild_gives() -> None:
    world = make_world()
    rng = random.Random(11)
    batches = [[random_record(world, rng) for _ in range(200)] for _ in range(2)]
    assert batches_stored_at_once(batches) == []
    assert TransferRecord.objects.count() == 400
    assert TransferRecord.objects.filter(activity__isnull=False).count() > 200
    assert_unions_give_the_records_numbers(world)
    assert_unions_as_rebuilt()
