"""bench/probes: 40 parallel copies of 256 MB files run through the portal (a run, real Celery worker) against the
same copies run by a bare script calling gfal2 in a thread pool, in one run; prints both aggregate throughputs, their
ratio (goal: the portal keeps at least 90 % of the bare rate) and the dispatch overhead per file.

    eval "$(bin/portal services | grep export)"        # or your own DATABASE_URL and REDIS_URL
    .venv/bin/python bench/probes.py                    # native XRootD TPC TB-T0 -> TB-T1-A
    .venv/bin/python bench/probes.py --source t0.https --destination t1b.https --mode pull

Needs the running testbed (`manage.py testbed up`). Works in its own database (<DATABASE_URL's name>_bench_probes,
created and migrated here) and starts its own worker (threads pool) on the queue `bench-probes`, so a running
portal's workers do not take its tasks. Aggregate throughput = bytes of all files / (last end - first start) of
the copies; the portal's figure also includes the dispatch (from run_start to the run's end). The test file is
made (once) before either side is timed; both sides copy it to fresh destination names with ADLER32 at both ends.
By default the sides run as warm, bare, portal, bare: an uncounted bare warm-up first (a run's first side was the
slower one in every phase, whichever it was), then the portal between two bare sides, its rate over their mean
(`--sides` changes the order: `--sides warm,portal,bare,portal`). Each side's destination files are deleted when it
ends. Each side's per-copy timing spread is printed too (timing_spread: the phases of every copy, and each straggler's);
the portal's phases come from its worker's log (runs.tasks logs each try's timeline at INFO).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 1024 * 1024
QUEUE = "bench-probes"


def bench_database_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit('set DATABASE_URL first: eval "$(bin/portal services | grep export)"')
    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_bench_probes"
    import psycopg

    admin = urlunsplit(parts._replace(path="/postgres")).replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def span(intervals: list[tuple[datetime, datetime]]) -> float:
    return (max(end for _, end in intervals) - min(start for start, _ in intervals)).total_seconds()


PHASES = ("waited", "first_byte", "all_bytes", "returned", "ended")


def timing_spread(side: str, copies: list[dict[str, Any]]) -> None:
    """Each copy's phases, in seconds: `waited` from its submission (the bare pool's, or the portal's dispatch) to
    its copy call; then from that call, gfal2's first and last byte reported (progress comes every few seconds), the
    call's return and the probe's end; `total` from submission to the end. Prints median, p90 and max of each, and
    every copy whose total is 1.5 times the median or more (a straggler) with its own phases."""

    def quantiles(values: list[float]) -> str:
        if not values:
            return "none"
        ordered = sorted(values)
        p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
        return f"{statistics.median(ordered):.1f}/{p90:.1f}/{ordered[-1]:.1f}"

    columns = [c for c in ("queued", *PHASES, "recorded", "total") if any(x.get(c) is not None for x in copies)]
    print(
        f"  {side} per copy, s (median/p90/max): "
        + ", ".join(f"{c} {quantiles([x[c] for x in copies if x.get(c) is not None])}" for c in columns)
    )
    totals = [x["total"] for x in copies if x.get("total") is not None]
    median = statistics.median(totals) if totals else 0.0
    for x in sorted(copies, key=lambda x: -(x.get("total") or 0.0)):
        if median and (x.get("total") or 0.0) >= 1.5 * median:
            phases = ", ".join(f"{c} {x[c]}" for c in columns if x.get(c) is not None)
            print(f"  {side} straggler {x['name']} ({x['total'] / median:.2f} x the median): {phases}")


def bare(source: str, destinations: list[str], mode: str, streams: int, size: int) -> tuple[float, list[Any]]:
    """The same copies with gfal2 alone: a thread pool, one context per copy, the same parameters and the same
    bounds as a run's (its timeouts, the stall guard, a copy left behind by later ones on its link stopped, a copy
    whose bytes have all arrived ended on a look at its destination), so that one copy that never starts or never
    returns cannot hold the bench for ever."""
    from measure.stall import CopyPeers
    from measure.transfer import transfer_file
    from runs.parameters import copy_timeouts_default
    from runs.tasks import gfal2_context

    bounds = copy_timeouts_default(largest=size, concurrency=len(destinations))
    peers = CopyPeers()

    def copy(destination: str) -> Any:
        return transfer_file(
            gfal2_context(), source, destination, mode=mode or None, streams=streams, peers=peers, size=size, **bounds
        )

    started = time.monotonic()
    submitted = time.time()
    with ThreadPoolExecutor(max_workers=len(destinations)) as pool:
        outcomes = list(pool.map(copy, destinations))
    wall = time.monotonic() - started
    copies = []
    for o in outcomes:
        waited = o.start.timestamp() - submitted
        phases = o.details.get("phases", {})
        ended = phases.get("ended") or phases.get("returned") or (o.end - o.start).total_seconds()
        copies.append(
            {
                "name": o.destination_url.rsplit("/", 1)[-1],
                "waited": round(waited, 3),
                **phases,
                "total": round(waited + ended, 3),
            }
        )
    timing_spread("bare", copies)
    return wall, outcomes


TIMELINE = re.compile(r"file (?P<file>\d+) try \d+: timeline (?P<timeline>\{.*\})")


def portal_copies(files: list[Any], timelines: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The portal's copies for timing_spread: `waited` from the file's dispatch (its task sent) to its copy call,
    split in `queued` (to the worker's receipt) and `claimed` (from there to the call); the phases from the worker's
    timeline line."""
    copies = []
    for f in files:
        line = timelines.get(f.pk)
        if line is None or f.dispatched_at is None:
            continue
        queued = line["received"] - f.dispatched_at.timestamp()
        waited = queued + line["started"]
        phases = {k: line.get(k) for k in PHASES[1:]}
        ended = phases.get("ended") or phases.get("returned") or 0.0
        copies.append(
            {
                "name": f"file {f.pk}",
                "queued": round(queued, 3),
                "waited": round(waited, 3),
                **phases,
                "recorded": line.get("recorded"),
                "total": round(waited + ended, 3),
            }
        )
    return copies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--size", type=int, default=256, help="MB (MiB) per file")
    parser.add_argument("--source", default="t0.root", help="testbed endpoint name")
    parser.add_argument("--destination", default="t1a.root", help="testbed endpoint name")
    parser.add_argument("--mode", default="", help="pull, push, streamed, native or blank (gfal2 chooses)")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument(
        "--sides",
        default="warm,bare,portal,bare",
        help="the sides in order, comma-separated: warm (bare copies, not counted), bare, portal; the ratio is the "
        "portal sides' mean rate over the bare sides' mean (default: a warm-up, then bare, portal, bare)",
    )
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = bench_database_url()
    os.environ["PROBES_TESTBED"] = "true"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    import logging

    logging.getLogger("gfal2").setLevel(logging.WARNING)  # gfal2's INFO lines would drown the figures
    from django.core.management import call_command
    from django.db.models import Avg, F

    from common import processes
    from measure.testfiles import test_file
    from portal.celery import app
    from runs import dispatch
    from runs.models import RunFile
    from runs.reaper import runs_reap
    from runs.services import run_start
    from runs.tasks import gfal2_context
    from sites.roles import membership_grant
    from sites.services import sites_import
    from testbed.grid import Testbed, TestbedConfig

    call_command("migrate", verbosity=0)
    bed = Testbed(TestbedConfig.from_settings())
    if not bed.is_up():
        raise SystemExit("the testbed is not running: .venv/bin/python manage.py testbed up")
    sites_import(document=bed.sites_document())
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench-probes")
    membership_grant(user=user, role="coordinator")
    size = args.size * MB
    source = test_file(gfal2_context(), bed.endpoint(args.source).url, size, checksum="ADLER32")
    destination_base = bed.endpoint(args.destination).url
    destination_key = args.destination.split(".")[0]
    stamp = time.strftime("%Y%m%d%H%M%S")

    workdir = ROOT / "var" / "bench-probes"
    workdir.mkdir(parents=True, exist_ok=True)
    pidfile = workdir / "worker.pid"
    env = {**os.environ, "DISPATCH_HEARTBEAT": "5"}
    argv = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool", "threads"]
    argv += ["--concurrency", str(args.files + 8), "-Q", QUEUE, "-n", f"bench-probes-{stamp}@%h"]
    argv += ["--without-gossip", "--without-mingle", "-l", "info"]  # info: each copy's timeline (runs.tasks)
    with app.connection_for_write() as conn, contextlib.suppress(Exception):  # the queue may not exist yet
        conn.default_channel.queue_purge(QUEUE)
    worker_log = workdir / "worker.log"
    log_from = worker_log.stat().st_size if worker_log.exists() else 0  # this run's lines only
    processes.start(argv, pidfile=pidfile, logfile=worker_log, env=env, cwd=ROOT)
    dispatch.served_queues = lambda: {QUEUE}  # type: ignore[assignment]  # this run's worker only
    dispatch.DEFAULT_QUEUE = QUEUE
    patterns = [f"**/bench-probes/*-{stamp}-*"]
    sides = [side.strip() for side in args.sides.split(",") if side.strip()]
    if not sides or set(sides) - {"warm", "bare", "portal"} or "bare" not in sides or "portal" not in sides:
        raise SystemExit(f"--sides {args.sides!r}: give warm, bare and portal, with at least one bare and one portal")
    try:
        time.sleep(3)  # the worker connects
        print(f"{args.files} files of {args.size} MiB, {args.source} -> {args.destination}, mode {args.mode or 'auto'}")

        figures: dict[str, Any] = {"bare": [], "portal": []}

        def bare_side(number: int, counted: bool = True) -> None:
            name = f"{'bare' if counted else 'warm'}-{stamp}-{number}"
            destinations = [f"{destination_base}/bench-probes/{name}/file-{i:05d}" for i in range(args.files)]
            bare_wall, outcomes = bare(source, destinations, args.mode, args.streams, size)
            failed = [o.error for o in outcomes if not o.ok]
            ok = [o for o in outcomes if o.ok]
            bare_rate = sum(o.bytes for o in ok) / span([(o.start, o.end) for o in ok]) if ok else 0.0
            what = "bare gfal2 thread pool" if counted else "warm-up (bare, not counted)"
            print(f"{what}: {bare_rate / 1e9:.3f} GB/s ({bare_wall:.1f} s wall, {len(failed)} failed)")
            # Copies whose bytes all arrived and whose call did not return (measure.arrival): how they ended.
            for o in outcomes:
                if "arrived" in o.details:
                    look = o.details["arrived"]
                    print(f"  bare: all bytes arrived, no return {look['grace']} s later: {look} -> ok={o.ok}")
            for directory in (bed.site_dir(destination_key) / "data").glob(f"**/bench-probes/{name}"):
                shutil.rmtree(directory, ignore_errors=True)  # the next side writes on an equally full disk
            if counted:
                figures["bare"].append({"wall": bare_wall, "rate": bare_rate, "failed": failed})

        def portal_side(number: int, counted: bool = True) -> None:
            started = time.monotonic()
            run = run_start(
                user=user,
                kind="transfer",
                parameters={
                    "source": bed.endpoint(args.source).url,
                    "destinations": [destination_base],
                    "file_size": size,
                    "file_count": args.files,
                    "concurrency": args.files,
                    "copy_mode": args.mode,
                    "streams": args.streams,
                },
            )
            reaped = time.monotonic()
            while True:
                run.refresh_from_db()
                if run.state in ("finished", "partly", "failed", "cancelled"):
                    break
                if time.monotonic() - reaped > 30:  # beat's job, as a deployment's beat would do it
                    runs_reap()
                    reaped = time.monotonic()
                time.sleep(0.2)
            portal_wall = time.monotonic() - started
            patterns.append(f"**/portal-runs/{run.directory}")
            with worker_log.open("rb") as log:
                log.seek(log_from)
                lines = log.read().decode(errors="replace").splitlines()
            timelines: dict[int, dict[str, Any]] = {}
            for line in lines:
                if "gfal2's copy call had not returned" in line:  # runs.tasks: a copy looked at (measure.arrival)
                    print("  portal:", line.split("WARNING/")[-1][:300])
                if found := TIMELINE.search(line):  # runs.tasks: each try's timeline, the last try's kept
                    timelines[int(found["file"])] = json.loads(found["timeline"])
            files = list(RunFile.objects.filter(run=run))
            timing_spread("portal", portal_copies(files, timelines))
            done = [f for f in files if f.state == "done"]
            portal_bytes = sum(f.bytes for f in done)
            copies_rate = portal_bytes / span([(f.start, f.end) for f in done]) if done else 0.0
            print(
                f"portal (run {run.pk}, {run.state}): {copies_rate / 1e9:.3f} GB/s over the copies, "
                f"{portal_bytes / portal_wall / 1e9:.3f} GB/s from run_start to the run's end ({portal_wall:.1f} s "
                f"wall, {len(files) - len(done)} not done, {sum(f.attempt > 1 for f in files)} tried twice)"
            )
            figures["portal"].append(
                {
                    "run": run,
                    "done": done,
                    "wall": portal_wall,
                    "rate": copies_rate,
                    "rate_all": portal_bytes / portal_wall,
                }
            )
            data = bed.site_dir(destination_key) / "data"
            for directory in data.glob(f"**/portal-runs/{run.directory}"):
                shutil.rmtree(directory, ignore_errors=True)

        # Whichever side ran first used to be the slower one, in every phase (a run's first side found the servers
        # cold): a warm-up side that is not counted comes first, and bare sides on both sides of the portal's cancel
        # a drift over the bench's minutes.
        for number, side in enumerate(sides):
            print(f"-- side {number + 1} of {len(sides)}: {side}")
            (portal_side if side == "portal" else bare_side)(number, counted=side != "warm")
        bare_rate = statistics.mean(b["rate"] for b in figures["bare"])
        copies_rate = statistics.mean(p["rate"] for p in figures["portal"])
        portal_rate = statistics.mean(p["rate_all"] for p in figures["portal"])
        bare_wall = statistics.mean(b["wall"] for b in figures["bare"])
        portal_wall = statistics.mean(p["wall"] for p in figures["portal"])
        failed = [error for b in figures["bare"] for error in b["failed"]]
        order = ",".join(sides)
        each = ", ".join(f"{b['rate'] / 1e9:.3f}" for b in figures["bare"])
        if bare_rate:
            print(
                f"ratio portal/bare ({order}; bare sides {each} GB/s): {copies_rate / bare_rate:.3f} over the copies, "
                f"{portal_rate / bare_rate:.3f} including dispatch (goal >= 0.90)"
            )
        else:
            print(f"ratio portal/bare ({order}): none, no bare copy succeeded")
        done = [f for p in figures["portal"] for f in p["done"]]
        runs = [p["run"] for p in figures["portal"]]
        dispatch = RunFile.objects.filter(run__in=runs).aggregate(latency=Avg(F("start") - F("dispatched_at")))
        latency = dispatch["latency"]
        gaps = sorted((f.start - f.dispatched_at).total_seconds() for f in done if f.dispatched_at)
        print(
            f"dispatch overhead per file: {(portal_wall - bare_wall) / args.files * 1000:.1f} ms of wall time "
            f"(portal wall - bare wall) / files; task sent -> copy started: mean "
            f"{(latency.total_seconds() if latency else 0) * 1000:.1f} ms, median "
            f"{statistics.median(gaps) * 1000 if gaps else 0:.1f} ms, max {max(gaps, default=0) * 1000:.1f} ms"
        )
        if failed:
            print("bare failures:", failed[:3])
    finally:
        processes.stop(pidfile)
        data = bed.site_dir(destination_key) / "data"
        for pattern in patterns:
            for directory in data.glob(pattern):
                shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
