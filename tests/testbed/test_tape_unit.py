"""Fast tests of the emulated tape (testbed/tape/, tape_prep.py, tape_mss.py): no servers besides a local one."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testbed import tape_mss, tape_prep
from testbed.tape import (
    CANCELED,
    COMPLETED,
    FAILED,
    NOT_ON_TAPE,
    SUBMITTED,
    TapeError,
    TapeHTTPServer,
    TapeLibrary,
    normalize_path,
)


def put(root: Path, where: str, lfn: str, size: int = 100) -> Path:
    """A file of size bytes at root/where/lfn."""
    path = root / where / lfn.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.fixture
def make_library(tmp_path: Path) -> Iterator[Callable[..., TapeLibrary]]:
    libraries: list[TapeLibrary] = []

    def make(**options: float) -> TapeLibrary:
        library = TapeLibrary(tmp_path, **options)  # type: ignore[arg-type]
        library.start()
        libraries.append(library)
        return library

    yield make
    for library in libraries:
        library.stop()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/data/a", "/data/a"),
        ("data//a/", "/data/a"),
        ("//data///x/./y", "/data/x/y"),
        ("/data/../../etc/passwd", "/etc/passwd"),
        ("root://host:1094//data/a", "/data/a"),
    ],
)
def test_paths_are_normalised_to_one_leading_slash_without_dots(raw: str, expected: str) -> None:
    assert normalize_path(raw) == expected


def test_an_empty_path_is_refused() -> None:
    with pytest.raises(ValueError):
        normalize_path("  ")


def test_a_bulk_request_is_read_tape_by_tape_paying_mount_and_read_time(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    # One drive, mount 0.2 s, 100 bytes at 1000 B/s = 0.1 s. Asked for in alternating order, the request's files
    # are read tape by tape: one mount per tape.
    for lfn in ("/data/A/f1", "/data/A/f2", "/data/B/f1", "/data/B/f2"):
        put(tmp_path, "tape", lfn)
    library = make_library(drives=1, drive_rate=1000, mount_time=0.2, stage_delay=0.1)
    order = ["/data/A/f1", "/data/B/f1", "/data/A/f2", "/data/B/f2"]
    request = library.submit(order)
    wait_for(lambda: all(task.state == COMPLETED for task in request.files.values()))
    read = ["/data/A/f1", "/data/A/f2", "/data/B/f1", "/data/B/f2"]
    finished = [request.files[path].finished - request.created for path in read]  # type: ignore[operator]
    expected = [0.4, 0.5, 0.8, 0.9]  # delay 0.1; mount A 0.2 + 2 reads; mount B 0.2 + 2 reads
    assert finished == sorted(finished)
    assert all(abs(got - want) < 0.1 for got, want in zip(finished, expected, strict=True)), finished
    assert library.drives[0].mounts == 2
    assert (tmp_path / "disk/data/B/f2").read_bytes() == b"x" * 100


def test_requests_of_one_file_each_pay_a_mount_at_every_tape_switch(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    # The same files as four requests of one (bulk size 1): first in, first out, a mount for each.
    for lfn in ("/data/A/f1", "/data/A/f2", "/data/B/f1", "/data/B/f2"):
        put(tmp_path, "tape", lfn)
    library = make_library(drives=1, drive_rate=1000, mount_time=0.2, stage_delay=0.1)
    requests = [library.submit([path]) for path in ("/data/A/f1", "/data/B/f1", "/data/A/f2", "/data/B/f2")]
    wait_for(lambda: all(request.completed() is not None for request in requests), timeout=10)
    assert library.drives[0].mounts == 4
    last = max(request.completed() for request in requests) - requests[0].created  # type: ignore[operator]
    assert last == pytest.approx(1.3, abs=0.15)  # 0.1 + 4 x (0.2 + 0.1): slower than the bulk's 0.9


def test_what_is_written_goes_to_tape_and_leaves_the_buffer(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    library = make_library(drives=1, drive_rate=1000, migration_delay=0.3)
    put(tmp_path, "disk", "/data/run-1/f1", size=300)
    assert library.locality("/data/run-1/f1") == "DISK"
    wait_for(lambda: library.locality("/data/run-1/f1") == "TAPE", timeout=5)
    assert library.archiveinfo_json(["/data/run-1/f1"]) == [{"path": "/data/run-1/f1", "locality": "TAPE"}]
    assert (library.migrated, library.evicted) == (1, 1)
    # A recall now comes from tape: it takes the drive's time, and the recalled copy stays online.
    request = library.submit(["/data/run-1/f1"])
    wait_for(lambda: request.completed() is not None)
    assert request.completed() - request.created >= 0.3  # type: ignore[operator]  # 300 bytes at 1000 B/s
    time.sleep(0.8)  # migration passes meanwhile leave it alone
    assert library.locality("/data/run-1/f1") == "DISK_AND_TAPE"


def test_a_file_still_being_written_is_not_migrated(tmp_path: Path) -> None:
    library = TapeLibrary(tmp_path, migration_delay=60)
    put(tmp_path, "disk", "/data/f1")
    assert library.migrate_once() == []
    now = time.time()
    assert library.migrate_once(now=now + 61) == ["/data/f1"]
    assert library.locality("/data/f1") == "DISK_AND_TAPE"  # the writer may still be closing it
    library.migrate_once(now=now + 122)
    assert library.locality("/data/f1") == "TAPE"


def test_the_lru_buffer_evicts_the_oldest_migrated_files_past_its_size(tmp_path: Path) -> None:
    library = TapeLibrary(tmp_path, migration_delay=0, evict="lru", buffer_bytes=250)
    for index in range(4):
        path = put(tmp_path, "disk", f"/data/f{index}")
        os.utime(path, (1000 + index, 1000 + index))
    library.migrate_once()
    assert [library.locality(f"/data/f{index}") for index in range(4)] == ["TAPE", "TAPE", "DISK_AND_TAPE",
                                                                          "DISK_AND_TAPE"]  # fmt: skip


def test_a_stage_request_over_the_limit_is_refused_with_the_limit(tmp_path: Path) -> None:
    library = TapeLibrary(tmp_path, max_request_files=3)
    with pytest.raises(TapeError) as refused:
        library.submit([f"/data/f{index}" for index in range(4)])
    assert refused.value.status == 413 and "at most 3 files, not 4" in refused.value.detail


def test_a_drive_holding_the_tape_does_not_mount_it_again(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    for lfn in ("/data/A/f1", "/data/A/f2", "/data/A/f3"):
        put(tmp_path, "tape", lfn)
    library = make_library(drives=1, drive_rate=1000, mount_time=0.2)
    request = library.submit(["/data/A/f1", "/data/A/f2", "/data/A/f3"])
    wait_for(lambda: request.completed() is not None)
    assert library.drives[0].mounts == 1
    assert request.completed() - request.created == pytest.approx(0.5, abs=0.1)  # type: ignore[operator]


def test_a_file_on_disk_completes_at_once_and_a_missing_one_fails(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    put(tmp_path, "disk", "/data/online")
    library = make_library(stage_delay=10)
    request = library.submit(["/data/online", "/data/missing"])
    assert request.files["/data/online"].state == COMPLETED
    assert request.files["/data/missing"].state == FAILED
    view = library.request_json(request.id)
    assert view["files"][0]["onDisk"] is True
    assert "onDisk" not in view["files"][1]
    assert view["files"][1]["error"] == NOT_ON_TAPE
    assert view["completedAt"] is not None


def test_cancel_stops_queued_files_and_the_one_being_read(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    put(tmp_path, "tape", "/data/A/big", size=10_000)
    put(tmp_path, "tape", "/data/A/queued")
    library = make_library(drives=1, drive_rate=1000)
    request = library.submit(["/data/A/big", "/data/A/queued"])
    wait_for(lambda: library.drives[0].task is not None)
    assert sorted(library.cancel(request.id)) == ["/data/A/big", "/data/A/queued"]
    wait_for(lambda: library.drives[0].task is None)
    assert {task.state for task in request.files.values()} == {CANCELED}
    assert not (tmp_path / "disk/data/A/big").exists()
    assert library.queue == []
    with pytest.raises(TapeError) as error:
        library.cancel(request.id, ["/data/not-in-request"])
    assert error.value.status == 400
    with pytest.raises(TapeError) as error:
        library.cancel("no-such-id")
    assert error.value.status == 404


def test_a_cancel_that_overtakes_its_stage_is_applied_when_it_arrives(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    # XRootD runs the prepare program asynchronously: a cancel may reach the daemon before its stage.
    put(tmp_path, "tape", "/data/A/f")
    put(tmp_path, "tape", "/data/A/g")
    library = make_library(stage_delay=10)
    assert library.cancel("rid-1", ["/data/A/f"], strict=False) == []
    request = library.submit(["/data/A/f", "/data/A/g"], request_id="rid-1")
    assert request.files["/data/A/f"].state == CANCELED
    assert request.files["/data/A/g"].state == SUBMITTED


def test_evict_removes_disk_copies_and_locality_follows(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    put(tmp_path, "tape", "/data/both")
    put(tmp_path, "disk", "/data/both")
    put(tmp_path, "disk", "/data/diskonly")
    put(tmp_path, "tape", "/data/tapeonly")
    library = make_library()
    info = library.archiveinfo_json(["/data/both", "/data/diskonly", "/data//tapeonly", "/data", "/data/none"])
    assert info == [
        {"path": "/data/both", "locality": "DISK_AND_TAPE"},
        {"path": "/data/diskonly", "locality": "DISK"},
        {"path": "/data/tapeonly", "locality": "TAPE"},
        {"path": "/data", "locality": "NONE"},
        {"path": "/data/none", "error": "No such file"},
    ]
    assert library.evict(["/data/both", "/data/diskonly", "/data/tapeonly"]) == {
        "/data/both": "evicted",
        "/data/diskonly": "kept: not on tape",
        "/data/tapeonly": "not on disk",
    }
    assert library.locality("/data/both") == "TAPE"


def test_the_prepare_query_answer_has_what_gfal2_checks(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    put(tmp_path, "tape", "/data/A/f")
    library = make_library(stage_delay=10)
    library.submit(["/data/A/f", "/data/A/missing"], request_id="rid-2")
    answer = library.prepare_query_json("rid-2", ["/data/A/f", "/data/A/missing", "/data/A/other"])
    assert answer["known"] is True
    first, missing, other = answer["responses"]
    assert first["path_exists"] and first["on_tape"] and first["requested"] and first["has_reqid"]
    assert first["online"] is False and first["error_text"] == "" and first["req_time"]
    assert missing["path_exists"] is False and missing["error_text"] == NOT_ON_TAPE
    assert other["requested"] is False and other["has_reqid"] is False
    assert library.prepare_query_json("unknown", ["/data/A/f"])["known"] is False


def test_the_prepare_program_parses_xrootd_arguments_and_keeps_its_answer_short() -> None:
    argv = ["--control", "http://127.0.0.1:9/", "-p", "0", "--", "rid:1", "stage", "/data/a", "/data/b?x=y"]
    assert tape_prep.parse_argv(argv) == ("http://127.0.0.1:9", "rid:1", "stage", ["/data/a", "/data/b"])
    with pytest.raises(tape_prep.UsageError):
        tape_prep.parse_argv(["query", "/data/a"])
    item = {
        "path": "/data/" + "x" * 60,
        "path_exists": True,
        "on_tape": True,
        "online": False,
        "requested": True,
        "has_reqid": True,
        "req_time": "1700000000",
        "error_text": "",
        "state": "SUBMITTED",
    }
    text = tape_prep.query_output({"responses": [item]}, "rid")
    assert json.loads(text) == {"request_id": "rid", "responses": [{k: v for k, v in item.items() if k != "state"}]}
    many = [{**item, "online": True}] * 12  # too long with every field: online files lose the ones gfal2 skips
    text = tape_prep.query_output({"responses": many}, "rid")
    assert len(text) <= tape_prep.MAX_OUTPUT
    assert set(json.loads(text)["responses"][0]) == set(tape_prep.ONLINE_FIELDS)


def test_the_mss_program_answers_statx_in_the_oss_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tape = tmp_path / "tape"
    put(tmp_path, "tape", "/data/f", size=123)
    tape_mss.run(["--tape-root", str(tape), "statx", "/data/f"])
    code, record = capsys.readouterr().out.splitlines()
    fields = record.split()
    assert code == "0" and fields[0] == "f" and len(fields[1]) == 9 and fields[8] == "123"
    assert fields[3] == str(os.getuid())
    tape_mss.run(["--tape-root", str(tape), "statx", "/data/nope"])
    assert capsys.readouterr().out == "-2\n"
    tape_mss.run(["--tape-root", str(tape), "dlist", "/data"])
    assert capsys.readouterr().out == "0\nf\n"
    tape_mss.run(["--tape-root", str(tape), "mv", "/data/f", "/data/sub/g"])
    tape_mss.run(["--tape-root", str(tape), "exists", "/data/sub/g"])
    tape_mss.run(["--tape-root", str(tape), "rm", "/data/sub/g"])
    tape_mss.run(["--tape-root", str(tape), "exists", "/data/sub/g"])
    assert capsys.readouterr().out == "0\n0\n0\n-2\n"


def test_the_tape_rest_api_answers_as_gfal2_expects_and_refuses_bad_input(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    put(tmp_path, "tape", "/data/A/f", size=10)
    library = make_library(drive_rate=1e6)
    server = TapeHTTPServer(("127.0.0.1", 0), library, "TEST", "http://unused", internal=True)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    server.public_base = base
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def call(method: str, path: str, body: object = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(base + path, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                raw = response.read()
                is_json = response.headers["Content-Type"] == "application/json"
                return response.status, json.loads(raw) if is_json else raw
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    try:
        status, discovery = call("GET", "/.well-known/wlcg-tape-rest-api")
        assert status == 200 and discovery["endpoints"][0]["uri"] == f"{base}/api/v1/"  # type: ignore[index]
        assert call("GET", "/data/A/f")[0] == 404
        status, created = call("POST", "/api/v1/stage/", {"files": [{"path": "//data/A/f"}]})
        assert status == 201
        rid = created["requestId"]  # type: ignore[index]
        wait_for(lambda: call("GET", f"/api/v1/stage/{rid}")[1]["files"][0]["onDisk"])  # type: ignore[index]
        assert call("GET", "/data/A/f") == (200, b"x" * 10)
        assert call("POST", "/api/v1/archiveinfo/", {"paths": ["/data/A/f"]})[1] == [
            {"path": "/data/A/f", "locality": "DISK_AND_TAPE"}
        ]
        assert call("POST", "/api/v1/release/gfal2-placeholder-id", {"paths": ["/data/A/f"]})[0] == 200
        assert not library.on_disk("/data/A/f")
        assert call("POST", "/api/v1/stage/", {"nope": 1})[0] == 400
        assert call("GET", "/api/v1/stage/unknown")[0] == 404
        assert call("POST", "/internal/stage", {"requestId": "x:1", "paths": ["/data/A/f"]})[0] == 201
        assert call("DELETE", "/api/v1/stage/x:1")[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_migrated_files_fill_tapes_of_a_fixed_capacity_and_a_recall_mounts_each_once(
    tmp_path: Path, make_library: Callable[..., TapeLibrary]
) -> None:
    library = make_library(drives=1, drive_rate=10_000, mount_time=0.2, tape_capacity=250)
    for index in range(4):
        path = put(tmp_path, "disk", f"/data/run/f{index}")
        os.utime(path, (1000 + index, 1000 + index))
    assert library.migrate_once() == [f"/data/run/f{index}" for index in range(4)]  # oldest first by name
    assert [library.catalog.tape_of(f"/data/run/f{index}") for index in range(4)] == [
        "T00001", "T00001", "T00002", "T00002"
    ]  # fmt: skip
    assert [library.locality(f"/data/run/f{index}") for index in range(4)] == ["TAPE"] * 4  # evicted (no delay)
    request = library.submit([f"/data/run/f{index}" for index in (0, 2, 1, 3)])  # asked across the two tapes
    wait_for(lambda: request.completed() is not None)
    assert library.drives[0].mounts == 2  # one per tape
    again = TapeLibrary(tmp_path, tape_capacity=250)  # the catalog outlives the daemon
    assert again.catalog.tape_of("/data/run/f3") == "T00002" and again.status_json()["tapes"]["tapes"] == 2
