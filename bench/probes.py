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
Each side's per-copy timing spread is printed too (timing_spread: the phases of every copy, and each straggler's);
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
    parser.add_argument("--portal-first", action="store_true", help="run the portal's side before the bare one")
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
    patterns = [f"**/bench-probes/bare-{stamp}"]
    try:
        time.sleep(3)  # the worker connects
        print(f"{args.files} files of {args.size} MiB, {args.source} -> {args.destination}, mode {args.mode or 'auto'}")

        destinations = [f"{destination_base}/bench-probes/bare-{stamp}/file-{i:05d}" for i in range(args.files)]
        figures: dict[str, Any] = {}

        def bare_side() -> None:
            bare_wall, outcomes = bare(source, destinations, args.mode, args.streams, size)
            failed = [o.error for o in outcomes if not o.ok]
            ok = [o for o in outcomes if o.ok]
            bare_rate = sum(o.bytes for o in ok) / span([(o.start, o.end) for o in ok]) if ok else 0.0
            print(f"bare gfal2 thread pool: {bare_rate / 1e9:.3f} GB/s ({bare_wall:.1f} s wall, {len(failed)} failed)")
            # Copies whose bytes all arrived and whose call did not return (measure.arrival): how they ended.
            for o in outcomes:
                if "arrived" in o.details:
                    look = o.details["arrived"]
                    print(f"  bare: all bytes arrived, no return {look['grace']} s later: {look} -> ok={o.ok}")
            figures.update(bare_wall=bare_wall, bare_rate=bare_rate, failed=failed)

        def portal_side() -> None:
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
            figures.update(
                run=run,
                done=done,
                portal_wall=portal_wall,
                copies_rate=copies_rate,
                portal_rate=portal_bytes / portal_wall,
            )

        # The side that runs second may find the servers' caches warm: --portal-first swaps them, to tell the order
        # from the portal's own cost.
        for side in (portal_side, bare_side) if args.portal_first else (bare_side, portal_side):
            side()
        bare_rate, bare_wall, failed = figures["bare_rate"], figures["bare_wall"], figures["failed"]
        copies_rate, portal_rate, portal_wall = figures["copies_rate"], figures["portal_rate"], figures["portal_wall"]
        run, done = figures["run"], figures["done"]
        order = "portal first" if args.portal_first else "bare first"
        if bare_rate:
            print(
                f"ratio portal/bare ({order}): {copies_rate / bare_rate:.3f} over the copies, "
                f"{portal_rate / bare_rate:.3f} including dispatch (goal >= 0.90)"
            )
        else:
            print(f"ratio portal/bare ({order}): none, no bare copy succeeded")
        dispatch = RunFile.objects.filter(run=run).aggregate(latency=Avg(F("start") - F("dispatched_at")))["latency"]
        gaps = sorted((f.start - f.dispatched_at).total_seconds() for f in done if f.dispatched_at)
        print(
            f"dispatch overhead per file: {(portal_wall - bare_wall) / args.files * 1000:.1f} ms of wall time "
            f"(portal wall - bare wall) / files; task sent -> copy started: mean "
            f"{(dispatch.total_seconds() if dispatch else 0) * 1000:.1f} ms, median "
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
