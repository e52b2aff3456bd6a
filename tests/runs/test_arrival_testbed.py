"""A copy whose bytes have all arrived and whose gfal2 call does not return, for real: a destination XRootD server
whose checksum program (`xrootd.chksum adler32 PROGRAM`) answers only HOLD s after it is asked, as a 5.5.3 server
whose checksum queue lost the job never answers (docs/testbed.md). The native third-party copy moves every byte,
the server's TPC job ends, and gfal2's end-to-end checksum question waits in XrdCl: no seam in the probe, the call
really does not return. The copy must be recorded ok within 15 s of its last byte, copied once."""

from __future__ import annotations

import copy
import shutil
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from common import processes
from measure.context import gfal2_context_new
from measure.testfiles import test_file
from measure.transfer import transfer_file
from results.models import TransferRecord
from runs.services import run_start
from sites.services import sites_import
from testbed.grid import Testbed
from testbed.grid.config import XROOTD_USER
from tests.runs.helpers import wait_for, wait_for_run_end

pytestmark = [pytest.mark.testbed]

MB = 1024 * 1024
HOLD = 30  # seconds the checksum program holds each answer: longer than the 15 s the portal may take
PORT_OFFSET = 90  # above TESTBED_BASE_PORT: the token testbed takes 50-66, the namespaced one 100-116
HUNG_SITE = "TB-HUNG"

CHECKSUM_PROGRAM = """#!/bin/sh
# xrootd.chksum's program: the file's path (its LFN) in $1, the checksum in hex on stdout. It notes when it was
# asked (epoch seconds: gfal2 asks the moment the third-party copy ended, so the time of the last byte), then holds
# the answer.
echo "$(date +%s.%N) $1" >> {log}
sleep {hold}
/usr/bin/xrdadler32 "{data}$1" | cut -d' ' -f1
"""


@dataclass
class HungServer:
    url: str  # root://127.0.0.1:PORT//data
    directory: Path

    def asked(self) -> list[tuple[float, str]]:
        """(when, path) of each checksum question the server took."""
        log = self.directory / "asked.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [(float(when), path) for when, path in (line.split(" ", 1) for line in lines)]

    def tpc_jobs(self, name: str) -> int:
        """The third-party copies the server began into a path ending with `name` (`ofs.tpc echo`: "TPC job N: WHO
        copying SOURCE to PATH")."""
        text = (self.directory / "log" / "hung" / "xrootd.log").read_text(errors="replace")
        lines = text.splitlines()
        return sum(1 for line in lines if line.startswith("TPC job") and " copying " in line and line.endswith(name))


@pytest.fixture(scope="module")
def hung_server(testbed: Testbed) -> Iterator[HungServer]:
    """An XRootD server of its own whose checksum answers take HOLD s, stopped after the module."""
    directory = testbed.dir / "hung-checksum"
    shutil.rmtree(directory, ignore_errors=True)
    data = directory / "data"
    for sub in ("data/data", "admin", "run", "log"):
        (directory / sub).mkdir(parents=True)
    program = directory / "checksum.sh"
    program.write_text(CHECKSUM_PROGRAM.format(log=directory / "asked.log", hold=HOLD, data=data))
    program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    port = testbed.config.base_port + PORT_OFFSET
    config = directory / "xrootd.cfg"
    config.write_text(
        "\n".join(
            [
                "all.export /",
                f"oss.localroot {data}",
                f"all.adminpath {directory / 'admin'}",
                f"all.pidpath {directory / 'run'}",
                f"xrd.port {port}",
                "xrd.allow host localhost",
                "xrd.allow host 127.0.0.1",
                f"xrootd.chksum adler32 {program}",
                "ofs.tpc autorm echo logok xfr 8 pgm /usr/bin/xrdcp --server",
            ]
        )
        + "\n"
    )
    argv = ["xrootd", "-c", str(config), "-l", str(directory / "log" / "xrootd.log"), "-n", "hung"]
    if processes.is_root():
        processes.chown_tree(directory, XROOTD_USER)
        argv += ["-R", XROOTD_USER]
    pidfile = directory / "xrootd.pid"
    processes.start(argv, pidfile=pidfile, logfile=directory / "out.log")
    url = f"root://127.0.0.1:{port}//data"
    try:
        wait_for(lambda: _answers(url), 20, f"the XRootD server at {url}")
        yield HungServer(url, directory)
    finally:
        processes.stop(pidfile)


def _answers(url: str) -> bool:
    try:
        gfal2_context_new().stat(url)
        return True
    except Exception:
        return False


def test_the_checksum_held_holds_gfal2s_copy_call(testbed: Testbed, hung_server: HungServer) -> None:
    """The premise, without the look (no `size`): the call returns only once the held checksum is answered."""
    source = test_file(gfal2_context_new(), testbed.endpoint("t0.root").url, 4 * MB, checksum="ADLER32")
    destination = f"{hung_server.url}/premise/{uuid.uuid4().hex}"
    began = time.monotonic()
    outcome = transfer_file(gfal2_context_new(), source, destination, mode="native", stall_timeout=120)
    assert outcome.ok, outcome.error
    assert time.monotonic() - began >= HOLD, "the copy returned before its checksum was answered"


def test_a_copy_whose_call_does_not_return_is_done_on_its_destination_within_15_s(
    testbed: Testbed, hung_server: HungServer
) -> None:
    size = 16 * MB
    source = test_file(gfal2_context_new(), testbed.endpoint("t0.root").url, size, checksum="ADLER32")
    name = f"probe/{uuid.uuid4().hex}"
    outcome = transfer_file(
        gfal2_context_new(), source, f"{hung_server.url}/{name}", mode="native", stall_timeout=120, size=size
    )
    returned = time.time()
    assert outcome.ok, outcome.error
    assert outcome.bytes == size
    assert outcome.details["arrived"]["ended_by"] == "look", outcome.details["arrived"]
    asked = [when for when, path in hung_server.asked() if path.endswith(name)]
    assert asked, "gfal2 never asked the destination for its checksum"
    assert returned - asked[0] <= 15, f"done {returned - asked[0]:.1f} s after the last byte"
    assert hung_server.tpc_jobs(name) == 1


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_a_run_records_such_a_copy_ok_once_within_15_s(
    testbed: Testbed, hung_server: HungServer, coordinator: Any, worker: Path
) -> None:
    """Through a run and its real worker: one record, ok, at the first try, its end within 15 s of the last byte."""
    document = copy.deepcopy(testbed.sites_document())
    t1a = next(site for site in document["sites"] if site["name"] == "TB-T1-A")
    hung = {**copy.deepcopy(t1a), "name": HUNG_SITE, "network_hosts": []}
    hung["endpoints"] = [{**t1a["endpoints"][0], "url": hung_server.url, "rse": ["TB_HUNG_DATADISK"]}]
    document["sites"].append(hung)
    sites_import(document=document)
    run = run_start(
        user=coordinator,
        kind="transfer",
        parameters={
            "source": testbed.endpoint("t0.root").url,
            "destinations": [hung_server.url],
            "file_size": 8 * MB,
            "file_count": 1,
            "concurrency": 1,
            "copy_mode": "native",
        },
    )
    wait_for_run_end(run, 60)
    assert run.state == "finished", run.message
    records = list(TransferRecord.objects.filter(run=run))
    assert [(r.attempt, r.state, r.bytes) for r in records] == [(1, "ok", 8 * MB)]
    name = records[0].destination_url.split("//data/", 1)[1]
    asked = [when for when, path in hung_server.asked() if path.endswith(name)]
    assert asked, "gfal2 never asked the destination for its checksum"
    last_byte = datetime.fromtimestamp(asked[0], UTC)
    assert (records[0].end - last_byte).total_seconds() <= 15
    assert hung_server.tpc_jobs(name) == 1
