"""Real messages of each format, with numbers as strings the way older FTS versions and dumps send them.

- FTS: an FTS3 "transfer complete" message of ATLAS (CNAF -> UAM, 2017-04-26) as archived by CERN MONIT, quoted in
  dmwm/CMSSpark src/python/CMSSpark/spark_utils.py (fts_tables); field names as cern-fts/fts3
  src/url-copy msg-ifce.cpp writes them. Numbers turned into strings ("1493217290323.000000") as old FTS sends.
- Rucio: a Hermes transfer-done event of DUNE (Manchester -> CCIN2P3, 2022-01-31) quoted in
  ivmfnal/data_dispatcher (RucioListener); payload keys as rucio/rucio lib/rucio/core/request.py
  (add_monitor_message) writes them: "transfer-id" is the FTS job id, as the FTS message's file_metadata carries
  Rucio's request_id.
- perfSONAR: a pScheduler throughput run (task spec source/dest, run start-time, result-merged) in the shape of
  perfsonar/pscheduler pscheduler-test-throughput validate.py (succeeded, intervals, summary{summary, streams}).
"""

from __future__ import annotations

import copy
from typing import Any

FTS_COMPLETE: dict[str, Any] = {
    "activity": "Data Consolidation",
    "block_size": "0",
    "buf_size": "0",
    "channel_type": "urlcopy",
    "chk_timeout": "0",
    "dest_srm_v": "2.2.0",
    "dst_hostname": "grid002.ft.uam.es",
    "dst_se": "srm://grid002.ft.uam.es",
    "dst_site_name": "",
    "dst_url": "srm://grid002.ft.uam.es:8443/srm/managerv2?SFN=/pnfs/ft.uam.es/data/atlas/atlasdatadisk/rucio/"
    "mc15_13TeV/60/36/EVNT.11173001._023578.pool.root.1",
    "endpnt": "fts3.cern.ch",
    "f_size": "10556847",
    "file_id": "1461431003",
    "file_metadata": {
        "activity": "Data Consolidation",
        "adler32": "d02c0375",
        "dest_rse_id": "a07afdb2953442f78bd87136e32c2674",
        "dst_rse": "UAM-LCG2_DATADISK",
        "dst_type": "DISK",
        "filesize": "1.0556847E7",
        "name": "EVNT.11173001._023578.pool.root.1",
        "request_id": "faebf1c016ad4c8a89d4be53b67347ce",
        "request_type": "transfer",
        "scope": "mc15_13TeV",
        "src_rse": "INFN-T1_DATADISK",
        "src_rse_id": "8ebac4c63f98418a8e4b7e9da4ced658",
        "src_type": "DISK",
        "verify_checksum": True,
    },
    "file_size": "10556847",
    "ipv6": False,
    "job_id": "f9b18c10-0132-51df-b341-3031a0a9ea39",
    "job_metadata": {"issuer": "rucio", "multi_sources": True},
    "job_state": "FINISHED",
    "latency": "9960",
    "log_link": "https://fts3.cern.ch:8449/fts3/ftsmon/#/f9b18c10-0132-51df-b341-3031a0a9ea39",
    "nstreams": "1",
    "operation_time": "2308",
    "remote_access": True,
    "retry": "0",
    "retry_max": "0",
    "src_hostname": "storm-fe.cr.cnaf.infn.it",
    "src_se": "srm://storm-fe.cr.cnaf.infn.it",
    "src_site_name": "",
    "src_srm_v": "2.2.0",
    "src_url": "srm://storm-fe.cr.cnaf.infn.it:8444/srm/managerv2?SFN=/atlas/atlasdatadisk/rucio/mc15_13TeV/60/36/"
    "EVNT.11173001._023578.pool.root.1",
    "srm_finalization_time": "9371",
    "srm_overhead_percentage": "95.6715802107948",
    "srm_overhead_time": "51014",
    "srm_preparation_time": "41643",
    "srm_space_token_dst": "ATLASDATADISK",
    "srm_space_token_src": "",
    "t__error_message": "",
    "t_channel": "storm-fe.cr.cnaf.infn.it__grid002.ft.uam.es",
    "t_error_code": "0",
    "t_failure_phase": "",
    "t_final_transfer_state": "Ok",
    "t_final_transfer_state_flag": "1",
    "t_timeout": "621",
    "tcp_buf_size": "0",
    "time_srm_fin_end": "1493217343934.000000",
    "time_srm_fin_st": "1493217334563.000000",
    "time_srm_prep_end": "1493217332255.000000",
    "time_srm_prep_st": "1493217290612.000000",
    "timestamp_checksum_dest_ended": "1493217343970.000000",
    "timestamp_checksum_dest_st": "1493217343934.000000",
    "timestamp_checksum_dst_diff": "36",
    "timestamp_checksum_src_diff": "124",
    "timestamp_chk_src_ended": "1493217290736.000000",
    "timestamp_chk_src_st": "1493217290612.000000",
    "timestamp_tr_comp": "1493217334563.000000",
    "timestamp_tr_st": "1493217332255.000000",
    "tr_bt_transfered": "10556847",
    "tr_error_category": "",
    "tr_error_scope": "",
    "tr_id": "2017-04-26-1435__storm-fe.cr.cnaf.infn.it__grid002.ft.uam.es__1461431003__"
    "f9b18c10-0132-51df-b341-3031a0a9ea39",
    "tr_timestamp_complete": "1493217344240.000000",
    "tr_timestamp_start": "1493217290323.000000",
    "user": "",
    "user_dn": "",
    "vo": "atlas",
}

RUCIO_TRANSFER_DONE: dict[str, Any] = {
    "created_at": "2022-01-31 16:58:17.235625",
    "event_type": "transfer-done",
    "payload": {
        "account": None,
        "activity": "User Subscriptions",
        "bytes": "1024000000",
        "checksum-adler": "93b40001",
        "checksum-md5": "b5c667a723a10a3485a33263c4c2b978",
        "created_at": None,
        "dst-rse": "DUNE_FR_CCIN2P3_XROOTD",
        "dst-type": "DISK",
        "dst-url": "root://ccxroot.in2p3.fr:1097/xrootd/in2p3.fr/tape/dune/rucio/test/c5/2e/1gbtestfilea.20220131",
        "duration": "239",
        "file-size": "1024000000",
        "guid": None,
        "name": "1gbtestfilea.20220131",
        "previous-request-id": None,
        "protocol": "root",
        "reason": "",
        "request-id": "b4ccdac3a01146a7859bd5458da9808e",
        "scope": "test",
        "src-rse": "MANCHESTER",
        "src-type": "DISK",
        "src-url": "root://bohr3226.tier2.hep.manchester.ac.uk/dune/RSE/test/c5/2e/1gbtestfilea.20220131",
        "started_at": "2022-01-31 16:53:42",
        "submitted_at": "2022-01-31 16:53:40.324004",
        "tool-id": "rucio-conveyor",
        "transfer-endpoint": "https://fts3-public.cern.ch:8446",
        "transfer-id": "57517b00-82b6-11ec-ba1a-fa163ecc10d8",
        "transfer-link": "https://fts3-public.cern.ch:8449/fts3/ftsmon/#/job/57517b00-82b6-11ec-ba1a-fa163ecc10d8",
        "transferred_at": "2022-01-31 16:57:41",
    },
}


def rucio_of_fts(fts: dict[str, Any]) -> dict[str, Any]:
    """The transfer-done event Rucio sends for the file of an FTS message (its request id and the FTS job id)."""
    event = copy.deepcopy(RUCIO_TRANSFER_DONE)
    payload = event["payload"]
    metadata = fts["file_metadata"]
    payload.update(
        {
            "request-id": metadata["request_id"],
            "transfer-id": fts["job_id"],
            "src-url": fts["src_url"],
            "dst-url": fts["dst_url"],
            "src-rse": metadata["src_rse"],
            "dst-rse": metadata["dst_rse"],
            "bytes": fts["file_size"],
            "file-size": fts["file_size"],
            "scope": metadata["scope"],
            "name": metadata["name"],
            "started_at": "2017-04-26 14:35:32",
            "transferred_at": "2017-04-26 14:35:34",
            "vo": fts["vo"],
        }
    )
    return event


def fts_variant(number: int, **changes: Any) -> dict[str, Any]:
    """The FTS sample as the number-th file of its job: its own tr_id, file id and Rucio request id."""
    message = copy.deepcopy(FTS_COMPLETE)
    message["tr_id"] = f"{FTS_COMPLETE['tr_id']}-{number}"
    message["file_id"] = str(1461431003 + number)
    message["file_metadata"]["request_id"] = f"{number:032x}"
    message.update(changes)
    return message


PERFSONAR_THROUGHPUT: dict[str, Any] = {
    "task": {
        "schema": 1,
        "test": {
            "type": "throughput",
            "spec": {
                "schema": 1,
                "source": "ps-bandwidth.cern.ch",
                "dest": "perfsonar-bw.cnaf.infn.it",
                "duration": "PT10S",
            },
        },
    },
    "run": {
        "href": "https://ps-bandwidth.cern.ch/pscheduler/tasks/5d1c7a0e-2f1d-4b8e-9d7c-3a1f0e6b2c11/runs/"
        "a8e0c1f4-7b2d-4c3e-8f9a-0b1c2d3e4f50",
        "start-time": "2026-03-02T10:00:00Z",
        "end-time": "2026-03-02T10:00:12Z",
        "state": "finished",
        "result-merged": {
            "schema": 1,
            "succeeded": True,
            "intervals": [
                {
                    "summary": {
                        "start": 0,
                        "end": 1.000059,
                        "throughput-bits": 8912369031.1,
                        "throughput-bytes": 1114112000,
                        "retransmits": 0,
                        "omitted": False,
                    },
                    "streams": [],
                }
            ],
            "summary": {
                "summary": {
                    "start": "0",
                    "end": "10.000231",
                    "throughput-bits": "9001234567.5",
                    "throughput-bytes": "11251543040",
                    "retransmits": "12",
                },
                "streams": [
                    {
                        "stream-id": 5,
                        "start": 0,
                        "end": 10.000231,
                        "throughput-bits": 4500617283.7,
                        "throughput-bytes": 5625771520,
                        "retransmits": 7,
                    },
                    {
                        "stream-id": 7,
                        "start": 0,
                        "end": 10.000231,
                        "throughput-bits": 4500617283.8,
                        "throughput-bytes": 5625771520,
                        "retransmits": 5,
                    },
                ],
            },
        },
    },
}
