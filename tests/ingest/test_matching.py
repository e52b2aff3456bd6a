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
