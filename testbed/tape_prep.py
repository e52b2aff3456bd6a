"""The prepare program of the testbed's XRootD tape site (``ofs.preplib libXrdOfsPrepGPI.so ... -run PROG``).

Standalone, stdlib only: XRootD runs it as user xrootd under /usr/bin/python3, through a wrapper::

    exec /usr/bin/python3 /work/main/testbed/tape_prep.py --control http://127.0.0.1:C "$@"

XrdOfsPrepGPI (5.5.3) passes everything in argv: options, ``--``, the request id, the request name, the paths::

    -p 0 -- <reqid> stage <path>...      bring online: queue the files with the daemon under XRootD's reqid, exit
    -- <reqid> query <path>...           poll: print one compact JSON object (the kXR_query answer for gfal2)
    -- * evict <path>...                 release: drop the disk copies of files that are on tape
    -- <reqid> cancel <path>...          abort: cancel those files of the request
    -- <reqid> prep <path>...            a plain prepare (no stage flag): nothing to do

The daemon (testbed/tape/) is reached on its control port (``--control URL`` or ``$TAPE_CONTROL_URL``).
Stage, evict and cancel run asynchronously inside XRootD, whose client already has its answer: they only post
to the daemon. A query's stdout goes back to the client, cut by XRootD at about 2000 bytes, so it is kept short.
Exit codes: 0 done, 1 the daemon failed or is unreachable, 2 bad arguments.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any

DEFAULT_CONTROL = "http://127.0.0.1:1094"
MAX_OUTPUT = 1900  # XrdOfsPrepGPI 5.5.3 truncates the query answer at 2048 - 40 bytes
QUERY_WAIT = 3.0  # how long a query waits for the stage of the same reqid, which XRootD runs asynchronously
TIMEOUT = 10.0
# The fields gfal2's xrootd plugin reads, in its order; files online need only the first five.
ONLINE_FIELDS = ("path", "path_exists", "on_tape", "online", "error_text")
FIELDS = (*ONLINE_FIELDS, "requested", "has_reqid", "req_time")


class UsageError(Exception):
    """Arguments this program does not understand."""


def parse_argv(argv: list[str]) -> tuple[str, str, str, list[str]]:
    """(control URL, reqid, request name, paths) from ``[--control URL] [GPI options] -- reqid name paths...``."""
    control = os.environ.get("TAPE_CONTROL_URL", DEFAULT_CONTROL)
    args = list(argv)
    if "--" not in args:
        raise UsageError("expected '-- <reqid> <request> [<path>...]'")
    split = args.index("--")
    options, rest = args[:split], args[split + 1 :]
    index = 0
    while index < len(options):
        option = options[index]
        if option == "--control" and index + 1 < len(options):
            control = options[index + 1]
            index += 2
            continue
        if option.startswith("--control="):
            control = option.split("=", 1)[1]
        index += 1  # GPI options (-a -C -n X -p N -w): not needed here; -n/-p values are skipped harmlessly
    if len(rest) < 2:
        raise UsageError("expected '-- <reqid> <request> [<path>...]'")
    reqid, name, paths = rest[0], rest[1], [path.split("?", 1)[0] for path in rest[2:]]
    return control.rstrip("/"), reqid, name, paths


def post(control: str, endpoint: str, payload: dict[str, Any]) -> Any:
    """POST JSON to the daemon's control port and return the decoded answer."""
    request = urllib.request.Request(
        f"{control}{endpoint}",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return json.loads(response.read() or b"null")


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def query_output(answer: dict[str, Any], reqid: str) -> str:
    """The query answer for gfal2, as short as it can be made while gfal2 still accepts it.

    Every file gets the full set of fields when that fits in MAX_OUTPUT bytes; otherwise files that are online
    get only the fields gfal2 reads for them. If even that is too long, XRootD will cut it (and gfal2 fail).
    """
    responses = answer.get("responses") or []
    full = [{key: item.get(key) for key in FIELDS} for item in responses]
    text = compact({"request_id": reqid, "responses": full})
    if len(text) <= MAX_OUTPUT:
        return text
    short = [{key: item.get(key) for key in (ONLINE_FIELDS if item.get("online") else FIELDS)} for item in responses]
    text = compact({"request_id": reqid, "responses": short})
    if len(text) > MAX_OUTPUT:
        sys.stderr.write(f"tape_prep: query answer of {len(text)} bytes will be truncated by XRootD\n")
    return text


def run(argv: list[str]) -> int:
    try:
        control, reqid, name, paths = parse_argv(argv)
    except UsageError as exc:
        sys.stderr.write(f"tape_prep: {exc}; argv={argv}\n")
        return 2
    try:
        if name == "stage":
            if paths:
                post(control, "/internal/stage", {"requestId": reqid, "paths": paths})
        elif name == "query":
            answer = post(control, "/internal/query", {"requestId": reqid, "paths": paths}) if paths else {}
            deadline = time.monotonic() + QUERY_WAIT
            while paths and not answer.get("known") and time.monotonic() < deadline:
                time.sleep(0.1)  # the stage of this reqid may not have reached the daemon yet
                answer = post(control, "/internal/query", {"requestId": reqid, "paths": paths})
            sys.stdout.write(query_output(answer, reqid) + "\n")
        elif name == "evict":
            if paths:
                post(control, "/internal/evict", {"paths": paths})
        elif name == "cancel":
            if paths:
                post(control, "/internal/cancel", {"requestId": reqid, "paths": paths})
        elif name != "prep":
            sys.stderr.write(f"tape_prep: unknown request {name!r}\n")
            return 2
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        sys.stderr.write(f"tape_prep: {name} {reqid}: daemon answered {exc.code}: {detail}\n")
        if name == "query":
            sys.stdout.write(compact({"request_id": reqid, "error": detail}) + "\n")
        return 1
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"tape_prep: {name} {reqid}: cannot reach the tape daemon at {control}: {exc}\n")
        if name == "query":
            sys.stdout.write(compact({"request_id": reqid, "error": f"tape daemon unreachable: {exc}"}) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
