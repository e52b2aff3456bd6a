"""Sites of ingested records: an RSE name decides before the URL's host, message by message, although a batch
matches each storage door once."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from rest_framework.test import APIClient

from results.models import TransferRecord

from .helpers import endpoint
from .samples import fts_variant

pytestmark = pytest.mark.django_db


def test_an_rse_name_and_the_url_host_decide_each_message_of_a_batch_that_shares_the_door(
    world: dict[str, Any], coordinator: APIClient
) -> None:
    """The sample's source door is CNAF's; one message names an RSE of UAM for it (RSE first), the next none (the
    host's site), the third CNAF's RSE again, all through the same scheme://host:port."""
    endpoint(world["uam"], "davs://grid002.ft.uam.es:8443/atlas", ["UAM-LCG2_DATADISK"])
    messages = [fts_variant(number) for number in range(3)]
    messages[0]["file_metadata"]["src_rse"] = "uam-lcg2_datadisk"  # RSE names in any case
    messages[1]["file_metadata"]["src_rse"] = ""
    messages[2]["file_metadata"]["src_rse"] = "INFN-T1_DATADISK"
    response = coordinator.post("/api/v1/ingest/fts/", data=orjson.dumps(messages), content_type="application/json")
    assert response.json()["accepted"] == 3
    sites = dict(TransferRecord.objects.values_list("origin_id", "source_site__name"))
    assert [sites[message["tr_id"]] for message in messages] == ["UAM-LCG2", "INFN-T1", "INFN-T1"]
    hosts = set(TransferRecord.objects.values_list("source_host", flat=True))
    assert hosts == {"storm-fe.cr.cnaf.infn.it"}


UAM_DOOR = "davs://grid002.ft.uam.es:8443/pnfs/ft.uam.es/data"


def post_to_uam(coordinator: APIClient, path: str) -> TransferRecord:
    message = fts_variant(0, dst_url=f"{UAM_DOOR}/{path}")
    message["file_metadata"]["dst_rse"] = ""
    response = coordinator.post("/api/v1/ingest/fts/", data=orjson.dumps([message]), content_type="application/json")
    assert response.json()["accepted"] == 1
    return TransferRecord.objects.select_related("destination_endpoint").get()


def test_the_longest_path_decides_the_endpoint_among_the_endpoints_of_one_door(
    world: dict[str, Any], coordinator: APIClient
) -> None:
    world["uam"].experiments.set([world["atlas"]])  # its endpoints serve ATLAS, the sample's experiment
    endpoint(world["uam"], f"{UAM_DOOR}/atlas")
    endpoint(world["uam"], f"{UAM_DOOR}/cms")

    record = post_to_uam(coordinator, "atlas/rucio/f")

    assert record.destination_endpoint.url == f"{UAM_DOOR}/atlas"  # type: ignore[union-attr]


def test_a_record_gets_no_endpoint_that_does_not_serve_its_experiment_but_keeps_the_site(
    world: dict[str, Any], coordinator: APIClient
) -> None:
    world["uam"].experiments.set([world["atlas"], world["cms"]])
    endpoint(world["uam"], f"{UAM_DOOR}/cms").experiments.set([world["cms"]])

    record = post_to_uam(coordinator, "cms/rucio/f")  # the sample is ATLAS's

    assert (record.destination_site, record.destination_endpoint) == (world["uam"], None)
