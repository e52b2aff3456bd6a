"""Records of unknown hosts are kept, listed for coordinators, and attach to their site once it is registered;
concurrent writers count every record once."""

from __future__ import annotations

import threading
from typing import Any

import orjson
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from challenges.models import Target
from ingest.selectors import unknown_hosts
from ingest.services import ingest_items
from ingest.tasks import records_attach_task
from results.models import FlowRollup, RateRollup, TransferRecord
from results.store.rollups import rollups_rebuild
from results.targets.rates import target_rates
from tests.results.link_rows import assert_unions_as_rebuilt, link_rows
from tests.results.rollup_rows import rollup_rows

from .helpers import uam_target
from .samples import FTS_COMPLETE, fts_variant


def rollup_state(*, approximate: bool = False) -> dict[tuple[Any, ...], Any]:
    """The rollups as {(table, time, *key): (bytes, files ok, files failed)}, rows that hold nothing (all taken out)
    left out; bytes approximate (sums of floats in another order)."""
    return {
        (table, *row[:-3]): (pytest.approx(row[-3], rel=1e-9, abs=1e-3) if approximate else row[-3], *row[-2:])
        for table, rows in rollup_rows().items()
        for row in rows
    }


@pytest.mark.django_db
def test_records_of_an_unknown_host_attach_when_its_endpoint_is_registered(
    world: dict[str, Any], atlas_ddm: APIClient, coordinator: APIClient
) -> None:
    # One activity with both targets: a transfer counts for one activity (results.store.attribution), which then has it
    # on each of its targets that the transfer passes.
    into_uam = uam_target(world)
    out_of_cnaf = Target.objects.create(activity=into_uam.activity, site=world["cnaf"], direction="out", rate=1e6)
    body = orjson.dumps([FTS_COMPLETE, fts_variant(1)])
    assert atlas_ddm.post("/api/v1/ingest/fts/", data=body, content_type="application/json").json()["accepted"] == 2
    assert target_rates(target=into_uam, max_window=60, stable_window=60).average_rate == 0
    out_before = target_rates(target=out_of_cnaf, max_window=60, stable_window=60).average_rate
    assert out_before == pytest.approx(2 * 10556847 / 60)

    [host] = unknown_hosts()
    assert (host.host, host.as_source, host.as_destination, host.network) == ("grid002.ft.uam.es", 0, 2, False)
    page = Client()
    page.force_login(get_user_model().objects.get(username="coordinator-all"))
    assert "grid002.ft.uam.es" in page.get("/ingest/unknown-hosts/").content.decode()
    assert records_attach_task() == 0  # nothing registered yet

    response = coordinator.post(
        "/api/v1/endpoints/",
        {"site": "UAM-LCG2", "url": "srm://grid002.ft.uam.es:8443/srm/managerv2"},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert records_attach_task() == 2  # what Celery beat runs every minute

    assert set(TransferRecord.objects.values_list("destination_site", flat=True)) == {world["uam"].pk}
    assert target_rates(target=into_uam, max_window=60, stable_window=60).average_rate == pytest.approx(
        2 * 10556847 / 60
    )
    assert target_rates(target=out_of_cnaf, max_window=60, stable_window=60).average_rate == pytest.approx(out_before)
    incremental = rollup_state(approximate=True)
    rollups_rebuild()
    assert rollup_state() == incremental  # moved, not added twice
    assert incremental
    unions = link_rows()  # the matrix's unions now hold the attached records too
    assert [(row[2], row[6]) for row in unions["totals"]] == [(world["uam"].pk, 2)]
    assert_unions_as_rebuilt()
    assert unknown_hosts() == []
    assert records_attach_task() == 0


@pytest.mark.django_db
def test_only_coordinators_see_the_unknown_hosts_page(world: dict[str, Any], atlas_ddm: APIClient) -> None:
    page = Client()
    page.force_login(get_user_model().objects.create_user(username="nobody"))
    assert page.get("/ingest/unknown-hosts/").status_code == 403


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_two_concurrent_writers_with_overlapping_batches_count_every_record_once(world: dict[str, Any]) -> None:
    from sites.tokens import token_issue

    token, _key = token_issue(username="ddm-atlas", role="ddm", experiment=world["atlas"])
    user = token.user
    messages = [fts_variant(i, timestamp_tr_st=str(1493217000000 + i * 1000)) for i in range(3000)]
    batches = [messages[:2000], messages[1000:]]  # 1000 messages in both
    barrier = threading.Barrier(2)
    results: list[Any] = [None, None]
    errors: list[BaseException] = []

    def write(slot: int) -> None:
        try:
            barrier.wait()
            for _ in range(2):  # and each retried once
                result = ingest_items(format="fts", items=batches[slot], user=user)
                results[slot] = (results[slot] or 0) + result.accepted
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sum(results) == 3000
    assert TransferRecord.objects.count() == 3000
    totals = RateRollup.objects.values_list("bytes", "files_ok")
    assert sum(files for _bytes, files in totals) == 3000
    assert sum(size for size, _files in totals) == pytest.approx(3000 * 10556847)
    incremental = rollup_state(approximate=True)
    rollups_rebuild()
    assert rollup_state() == incremental


@pytest.mark.django_db
def test_perfsonar_records_of_an_unknown_network_host_attach_when_it_is_registered(
    world: dict[str, Any], atlas_ddm: APIClient
) -> None:
    import copy

    from sites.models import NetworkHost

    from .samples import PERFSONAR_THROUGHPUT

    run = copy.deepcopy(PERFSONAR_THROUGHPUT)
    run["task"]["test"]["spec"]["dest"] = "psb01-gva.cern.ch:5201"
    body = orjson.dumps([run])
    assert (
        atlas_ddm.post("/api/v1/ingest/perfsonar/", data=body, content_type="application/json").json()["accepted"] == 1
    )
    [host] = unknown_hosts()
    assert (host.host, host.network) == ("psb01-gva.cern.ch", True)
    NetworkHost.objects.create(site=world["uam"], address="psb01-gva.cern.ch")
    assert records_attach_task() == 1
    record = TransferRecord.objects.get()
    assert (record.source_site, record.destination_site) == (world["cern"], world["uam"])
    assert FlowRollup.objects.filter(flow="in", site_id=world["uam"].pk).exists()
