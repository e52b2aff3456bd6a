"""Retiring raw records (manage.py records_retire, results.store.retention): whole months dropped once their rollups
are final, all or none; the rollups stay, a record of a retired month sent again counts once, pages say so."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from challenges.models import Challenge
from results.models import LinkInterval, RateRollup, RetiredMonth, TransferRecord
from results.services import records_store
from results.store.link_intervals import link_intervals_rebuild
from results.store.partitions import partition_ensure, partitions_list
from results.store.retention import RetireRefused, records_retire
from results.store.rollups import rollups_rebuild
from sites.models import Experiment

pytestmark = pytest.mark.django_db

MAY = date(2019, 5, 1)
T0 = datetime(2019, 5, 10, 12, tzinfo=UTC)


@pytest.fixture
def may_records() -> Experiment:
    """Two records of May 2019 in that month's own partition."""
    partition_ensure(month=MAY)
    atlas = Experiment.objects.create(name="ATLAS")
    records_store(records=[record(atlas, "a"), record(atlas, "b")])
    return atlas


def record(experiment: Experiment, origin_id: str, **values: Any) -> TransferRecord:
    fields = {"experiment": experiment, "bytes": 6_000_000, "start": T0, "end": T0 + timedelta(minutes=1)}
    return TransferRecord(**fields | {"state": "ok", "origin": "fts", "origin_id": origin_id} | values)


def test_retiring_drops_the_months_records_and_keeps_their_rollups(may_records: Experiment) -> None:
    rollup = sorted(RateRollup.objects.values_list("minute", "bytes"))
    retired = records_retire(before=date(2019, 6, 1))
    assert [(month.month, month.records) for month in retired] == [(MAY, 2)]
    assert MAY not in partitions_list()
    assert not TransferRecord.objects.exists()
    assert sorted(RateRollup.objects.values_list("minute", "bytes")) == rollup != []
    assert RetiredMonth.objects.get().records == 2


def test_a_record_of_a_retired_month_sent_again_counts_once(may_records: Experiment) -> None:
    records_retire(before=date(2019, 6, 1))
    again = records_store(records=[record(may_records, "a", end=T0 + timedelta(minutes=5))])
    assert (again.stored, again.duplicates) == (0, 1)


def test_a_month_of_a_challenge_that_ended_days_ago_is_refused_and_nothing_changes(may_records: Experiment) -> None:
    Challenge.objects.create(name="May", slug="may", start=T0, end=datetime(2019, 6, 3, tzinfo=UTC))
    with pytest.raises(RetireRefused, match="challenge may ends 2019-06-03"):
        records_retire(before=date(2019, 6, 1), now=datetime(2019, 6, 5, tzinfo=UTC))
    assert MAY in partitions_list()
    assert TransferRecord.objects.count() == 2 and not RetiredMonth.objects.exists()


def test_a_month_that_ended_less_than_the_grace_ago_is_refused(may_records: Experiment) -> None:
    with pytest.raises(RetireRefused, match="records may still come in until 2019-06-08"):
        records_retire(before=date(2019, 6, 1), now=datetime(2019, 6, 4, tzinfo=UTC))
    assert TransferRecord.objects.count() == 2


def test_the_command_refuses_a_bad_date_with_its_format() -> None:
    with pytest.raises(CommandError, match="'2019-13-01' is not a date: give YYYY-MM-DD"):
        call_command("records_retire", "--before", "2019-13-01")


def test_the_command_says_why_it_refuses_and_changes_nothing(may_records: Experiment) -> None:
    Challenge.objects.create(name="Long", slug="long", start=T0, end=datetime.now(UTC) + timedelta(days=1))
    with pytest.raises(CommandError, match="rollups not final, nothing retired"):
        call_command("records_retire", "--before", "2019-06-01")
    assert TransferRecord.objects.count() == 2 and MAY in partitions_list()


def test_the_rollups_are_not_rebuilt_once_records_were_retired(may_records: Experiment) -> None:
    records_retire(before=date(2019, 6, 1))
    with pytest.raises(RuntimeError, match="raw records of 2019-05 were retired"):
        rollups_rebuild()
    assert RateRollup.objects.exists()
    islands = LinkInterval.objects.count()
    with pytest.raises(RuntimeError, match="matrix's unions: the raw records of 2019-05 were retired"):
        link_intervals_rebuild()
    assert LinkInterval.objects.count() == islands
    for command in ("rollups_rebuild", "link_intervals_rebuild", "failure_counts_rebuild"):  # said, no traceback
        with pytest.raises(CommandError, match="raw records of 2019-05 were retired"):
            call_command(command)
    assert RateRollup.objects.exists() and LinkInterval.objects.count() == islands


def test_the_records_page_says_which_months_were_retired_and_when(may_records: Experiment) -> None:
    from django.contrib.auth import get_user_model

    Challenge.objects.create(name="May", slug="may", start=T0, end=datetime(2019, 5, 20, tzinfo=UTC))
    records_retire(before=date(2019, 6, 1))
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root"))
    page = client.get("/results/may/records/").content.decode()
    assert f"2019-05 (retired {datetime.now(UTC):%Y-%m-%d})" in page
