"""bench/scale: a challenge of the 2028 size on one PostgreSQL (issue #27), then the server time of every page
and API a coordinator opens, cold and warm, beside its goal, and the ingest rate into the full table.

    eval "$(bin/portal services | grep export)"
    .venv/bin/python bench/scale.py --records 1000000          # default 100,000,000: see the disk it needs first

It works in its own database (<DATABASE_URL's name>_scale, or --database NAME), never the portal's. Shape: 40 sites
(a Tier-0, 13 Tier-1s, 26 Tier-2s), 6 experiments, 4 weeks (begun 27 days ago: the records fill the 27 days up
to now, so the now board has a live challenge), 12 activities (an export fortnight and a consolidation
fortnight per experiment) with 60 targets, FTS-like records (long ids and URLs, a Rucio transfer key on 9 in 10,
8 % failures in FTS's mix: timeouts, missing files, full disks, checksums, permissions, refused connections).

Generated on the server: generate_series in chunks straight into the partitioned table, with the table's indexes
and foreign keys dropped during the load and made again after (as a restore does), the records' identities into
results_recordkey, and the rollups rebuilt in bulk (results.store.rollups.rollups_rebuild), never the per-record path.
It measures the disk the rows took and prints it per 100 million rows; it refuses to start when the database's
disk has less free space than N rows need (DISK_PER_100M, measured, plus a quarter for WAL and sorts).

Then, in this process (Django's test client: server time without the network), the median of --repeat calls,
"cold" after emptying the Django cache (a FLUSHDB of the Redis database of REDIS_URL: use your own; PostgreSQL's
buffer cache is NOT dropped, which needs a restart of the server, so cold here means cold for the portal's
caches), "warm" after a call that filled it; and each call's peak resident memory above the process's before it.
Last, --messages FTS messages posted to a real gunicorn (bench/ingest.py's machinery) into the full table and
into an empty database, and both rates. --reuse times the reads of an earlier run of the same --records again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # before bench/ (the script's directory): bench/ingest.py is not the ingest app

# Measured by this bench (see bench/README.md): bytes of disk per 100 million records (the partitions and their
# 13 indexes, results_recordkey); the rollups apart.
DISK_PER_100M = 95e9  # records and keys: 837 bytes a record fresh at 1 million, 944 after ingest churn (2026-11-25)
DISK_ROLLUPS = 15e9  # the rollups of a 4-week challenge of this shape, bounded by minutes x flows (estimate)
DISK_MARGIN = 1.25
CHUNK = 2_000_000
EXPERIMENTS = ("ALICE", "ATLAS", "Belle II", "CMS", "DUNE", "LHCb")
# (message, FTS category, scope, phase, slots of 10): the FTS-like mix of the failures.
FAILURES = (
    ("TRANSFER [110] TRANSFER Operation timed out", "TRANSFER_TIMEOUT", "TRANSFER", "TRANSFER", 4),
    ("SOURCE [2] SOURCE CHECKSUM No such file or directory", "NO_SUCH_FILE", "SOURCE", "TRANSFER_PREPARATION", 2),
    ("DESTINATION [28] DESTINATION OVERWRITE No space left on device", "NO_SPACE", "DESTINATION", "TRANSFER", 1),
    ("TRANSFER [5] TRANSFER Checksum mismatch between source and destination", "CHECKSUM", "TRANSFER", "CHECKSUM", 1),
    ("SOURCE [13] SOURCE Permission denied (token lacks storage.read)", "PERMISSION", "SOURCE", "TRANSFER", 1),
    ("TRANSFER [111] TRANSFER Connection refused", "CONNECTION", "TRANSFER", "TRANSFER", 1),
)
GOAL_PAGE_COLD, GOAL_PAGE_WARM, GOAL_BOARD_COLD = 1.0, 0.3, 0.3
GOAL_INGEST, GOAL_MEMORY = 43_000, 200e6

GENERATE = """
WITH made AS (
INSERT INTO results_transferrecord
    (experiment_id, source_site_id, destination_site_id, source_url, destination_url, bytes, start, "end", state,
     error_message, error_category, mode, concurrency, origin, origin_id, transfer_key, source_host,
     destination_host, attempt, activity_id, ddm_activity, fts_error_category, error_scope, failure_phase)
SELECT p.experiment_id, p.src, p.dst,
       'davs://' || hosts[p.src_n] || ':443/' || lower(p.experiment) || '/rucio/data28/' || p.hash || '/DAOD.' || i,
       'davs://' || hosts[p.dst_n] || ':443/' || lower(p.experiment) || '/rucio/data28/' || p.hash || '/DAOD.' || i,
       CASE WHEN p.failed THEN 0 ELSE (5e8 + random() ^ 3 * 9.5e9)::bigint END,
       p.start, p.start + interval '10 seconds' + random() ^ 2 * interval '600 seconds',
       CASE WHEN p.failed THEN 'failed' ELSE 'ok' END,
       CASE WHEN p.failed THEN (%(messages)s::text[])[p.f] ELSE '' END,
       CASE WHEN p.failed THEN (%(categories)s::text[])[p.f] ELSE '' END, '', NULL, 'fts',
       '2028__' || hosts[p.src_n] || '__' || hosts[p.dst_n] || '__' || i || '__' || substr(p.hash, 1, 12),
       CASE WHEN i %% 10 < 9 THEN md5('request' || i) || '/' || md5('job' || i / 100) ELSE '' END,
       hosts[p.src_n], hosts[p.dst_n], 1, f.activity_id,
       CASE WHEN p.phase = 0 THEN 'T0 Export' ELSE 'Data Consolidation' END,
       CASE WHEN p.failed THEN (%(fts)s::text[])[p.f] ELSE '' END,
       CASE WHEN p.failed THEN (%(scopes)s::text[])[p.f] ELSE '' END,
       CASE WHEN p.failed THEN (%(phases)s::text[])[p.f] ELSE '' END
FROM (
    SELECT s.*, (%(site_ids)s::bigint[])[s.src_n] AS src, (%(site_ids)s::bigint[])[s.dst_n] AS dst,
           (%(experiment_ids)s::bigint[])[1 + s.e] AS experiment_id, (%(experiments)s::text[])[1 + s.e] AS experiment
    FROM (
        SELECT r.i, i %% 6 AS e, md5(i::text) AS hash, i %% 100 < 8 AS failed,
               (%(failure_slots)s::int[])[1 + (i / 100) %% 10] AS f, r.start,
               (r.start >= %(half)s)::int AS phase,
               CASE WHEN r.start < %(half)s THEN
                    CASE WHEN r.u < 0.7 THEN 1 ELSE 2 + (i / 7) %% 13 END
               ELSE CASE WHEN r.u < 0.6 THEN 2 + (i / 7) %% 13 ELSE 2 + (i / 5) %% 13 END END AS src_n,
               CASE WHEN r.start < %(half)s THEN
                    CASE WHEN r.u < 0.7 THEN 2 + ((i %% 6) * 2 + (i / 6) %% 5) %% 13 ELSE 15 + (i / 11) %% 26 END
               ELSE CASE WHEN r.u < 0.6 THEN 15 + (i / 11) %% 26
                         ELSE 2 + ((i / 5) %% 13 + 1 + (i / 13) %% 12) %% 13 END END AS dst_n
        FROM (
            -- random() in a select list: once a row (in an uncorrelated LATERAL it would be once in all)
            SELECT i, %(start)s::timestamptz + random() * %(span)s::interval AS start, random() AS u
            FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS i
        ) AS r
    ) AS s
) AS p
CROSS JOIN (SELECT %(hosts)s::text[] AS hosts) AS h
LEFT JOIN scale_flow AS f ON f.e = p.e AND f.phase = p.phase AND f.src = p.src AND f.dst = p.dst
RETURNING origin, experiment_id, origin_id, transfer_key
)
INSERT INTO results_recordkey (key)
SELECT key FROM made AS r, LATERAL (VALUES ({origin_key}),
    (CASE WHEN r.transfer_key <> '' THEN {transfer_key} END)) AS k (key)
WHERE key IS NOT NULL
"""


def bench_database(name: str | None) -> str:
    from rates import bench_database_url

    url = os.environ.get("DATABASE_URL", "")
    return bench_database_url(name or (url.rsplit("/", 1)[-1] + "_scale" if url else None))


def free_disk() -> tuple[str, int]:
    """The database server's data directory and the free bytes of its disk (the server is on this machine)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW data_directory")
        path = Path(cursor.fetchone()[0])
    while not path.exists() or not os.access(path, os.R_OK):
        path = path.parent
    return str(path), shutil.disk_usage(path).free


def plan_build(records: int) -> dict[str, Any]:
    """Experiments, 40 sites, the challenge (begun 27 days ago, 4 weeks), 12 activities and 60 targets, and the
    table scale_flow of the flows each activity's targets claim (what results.store.attribution would decide)."""
    from django.db import connection

    from challenges.models import Activity, Challenge, Target
    from sites.models import Experiment, Site

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE results_raterollup, results_raterolluphour, results_flowrollup, results_transferrecord, "
            "results_recordkey, results_rollupversion, results_linktotals, results_linkinterval, results_linkerror, "
            "results_failurecount, results_failurehour, results_failuremessage, "
            "challenges_target, challenges_activity, "
            "challenges_challenge, sites_site_experiments, sites_site, sites_experiment CASCADE"
        )
    experiments = [Experiment.objects.create(name=name) for name in EXPERIMENTS]
    names = ["T0-CERN"] + [f"T1-{n:02d}" for n in range(13)] + [f"T2-{n:02d}" for n in range(26)]
    sites = [Site.objects.create(name=n, tier=int(n[1]), country="CH") for n in names]
    for site in sites:
        site.experiments.set(experiments)
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(days=27)
    challenge = Challenge.objects.create(
        name=f"Bench 2028, {records} records", slug="bench", start=start, end=start + timedelta(days=28)
    )
    t1, t2 = sites[1:14], sites[14:]
    flows = []
    for e, experiment in enumerate(experiments):
        for phase in (0, 1):
            activity = Activity.objects.create(
                challenge=challenge,
                name=f"{experiment.name} {'export' if phase == 0 else 'consolidation'}",
                experiment=experiment,
                mode="T0 export" if phase == 0 else "consolidation",
                kind="transfer",
                start=start + timedelta(days=14 * phase),
                end=start + timedelta(days=14 * phase + 14),
            )
            if phase == 0:
                ins, links = [t1[(e * 2 + k) % 13] for k in range(5)], []
            else:
                ins = [t2[(e * 3 + k) % 26] for k in range(3)]
                links = [(t1[e % 13], t1[(e + 1) % 13]), (t1[(e + 2) % 13], t1[(e + 3) % 13])]
            for site in ins:
                Target.objects.create(activity=activity, site=site, direction="in", rate=2e9)
                flows += [(activity.pk, e, phase, source.pk, site.pk) for source in sites if source != site]
            for source, destination in links:
                Target.objects.create(activity=activity, link_from=source, link_to=destination, rate=1e9)
                flows.append((activity.pk, e, phase, source.pk, destination.pk))
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS scale_flow")
        cursor.execute(
            "CREATE UNLOGGED TABLE scale_flow (activity_id bigint, e int, phase int, src bigint, dst bigint)"
        )
        cursor.executemany("INSERT INTO scale_flow VALUES (%s, %s, %s, %s, %s)", flows)
        cursor.execute(
            "DELETE FROM scale_flow a USING scale_flow b WHERE a.ctid > b.ctid "
            "AND (a.e, a.phase, a.src, a.dst) = (b.e, b.phase, b.src, b.dst)"
        )
    hosts = [f"se.{name.lower()}.example.org" for name in names]
    return {"challenge": challenge, "sites": sites, "experiments": experiments, "hosts": hosts}


def indexes_drop() -> list[str]:
    """Drop the records' indexes (but the primary key), foreign keys and the keys' primary key for the load;
    returns the statements that make them again."""
    from django.db import connection

    from common.bulk import indexes_set_aside

    with connection.cursor() as cursor:
        again = indexes_set_aside(cursor, "results_transferrecord")
        cursor.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'results_transferrecord'::regclass AND contype = 'f'"
        )
        for name, definition in cursor.fetchall():
            cursor.execute(f'ALTER TABLE results_transferrecord DROP CONSTRAINT "{name}"')
            again.append(f'ALTER TABLE results_transferrecord ADD CONSTRAINT "{name}" {definition}')
        cursor.execute("ALTER TABLE results_recordkey DROP CONSTRAINT results_recordkey_pkey")
        again.append("ALTER TABLE results_recordkey ADD CONSTRAINT results_recordkey_pkey PRIMARY KEY (key)")
    return again


def records_generate(plan: dict[str, Any], records: int) -> float:
    """Generate the records in chunks (autocommit); returns the seconds of the load alone."""
    from django.db import connection

    from results.failures.causes import failure_categorize
    from results.store.keys import ORIGIN_KEY, TRANSFER_KEY
    from results.store.partitions import month_add, month_start, partition_ensure

    challenge = plan["challenge"]
    month = month_start(challenge.start)
    while month <= month_start(datetime.now(UTC)):
        partition_ensure(month=month)
        month = month_add(month, 1)
    slots = [index + 1 for index, failure in enumerate(FAILURES) for _ in range(failure[4])]
    params = {
        "messages": [f[0] for f in FAILURES],
        "categories": [failure_categorize(f[0]) for f in FAILURES],
        "fts": [f[1] for f in FAILURES],
        "scopes": [f[2] for f in FAILURES],
        "phases": [f[3] for f in FAILURES],
        "failure_slots": slots,
        "site_ids": [site.pk for site in plan["sites"]],
        "experiment_ids": [experiment.pk for experiment in plan["experiments"]],
        "experiments": [experiment.name.replace(" ", "") for experiment in plan["experiments"]],
        "hosts": plan["hosts"],
        "start": challenge.start,
        "half": challenge.start + timedelta(days=14),
        "span": datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30) - challenge.start,
    }
    sql = GENERATE.format(origin_key=ORIGIN_KEY.format(r="r"), transfer_key=TRANSFER_KEY.format(r="r"))
    began = time.perf_counter()
    for first in range(1, records + 1, CHUNK):
        last = min(first + CHUNK - 1, records)
        with connection.cursor() as cursor:
            cursor.execute(sql, {**params, "first": first, "last": last})
        seconds = time.perf_counter() - began
        print(f"  generated {last:,} records, {last / seconds:,.0f} rows/s", flush=True)
    return time.perf_counter() - began


def _rebuilt(rebuild: Callable[[], int], tables: tuple[str, ...]) -> tuple[float, int]:
    """Run one bulk rebuild and VACUUM ANALYZE what it wrote: its seconds and the rows it reports."""
    from django.db import connection

    began = time.perf_counter()
    rows = rebuild()
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")
    return time.perf_counter() - began, rows


def build(records: int) -> dict[str, Any]:
    """The whole load, timed step by step; returns the plan."""
    from django.db import connection

    from results.store.failure_counts import failure_counts_rebuild
    from results.store.link_intervals import link_intervals_rebuild
    from results.store.rollups import rollups_rebuild

    plan = plan_build(records)
    again = indexes_drop()
    loaded = records_generate(plan, records)
    print(f"records and keys loaded: {loaded:.1f} s, {records / loaded:,.0f} rows/s (no index but the primary key)")
    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '512MB'")
        for statement in again:
            cursor.execute(statement)
        cursor.execute("ANALYZE")  # every table: the plan's too (a fresh challenge_activity misleads the planner)
    indexed = time.perf_counter() - began
    print(f"indexes, foreign keys and key index made again: {indexed:.1f} s", flush=True)
    with connection.cursor() as cursor:
        cursor.execute("SET work_mem = '256MB'")  # the rebuild's aggregate in memory (the session's, this process)
    rolled, rows = _rebuilt(rollups_rebuild, ("results_raterollup", "results_raterolluphour", "results_flowrollup"))
    print(f"rollups rebuilt in bulk: {rolled:.1f} s ({rows:,} minute rows)")
    unions, islands = _rebuilt(
        link_intervals_rebuild, ("results_linktotals", "results_linkinterval", "results_linkerror")
    )
    print(f"the matrix's unions rebuilt in bulk: {unions:.1f} s ({islands:,} intervals)")
    counted, failed = _rebuilt(
        failure_counts_rebuild, ("results_failurecount", "results_failurehour", "results_failuremessage")
    )
    print(f"the failure causes' counts rebuilt in bulk: {counted:.1f} s ({failed:,} failed records)")
    total = loaded + indexed + rolled + unions + counted
    print(
        f"generation in all: {total:.1f} s, {records / total:,.0f} records/s "
        "(load, indexes, rollups, unions, failure counts)"
    )
    return plan


def disk_report(records: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
            "WHERE inhparent = 'results_transferrecord'::regclass"
        )
        table = int(cursor.fetchone()[0])
        sizes = {"records (partitions, indexes, TOAST)": table}
        for name in ("results_recordkey", "results_raterollup", "results_raterolluphour", "results_flowrollup"):
            cursor.execute("SELECT pg_total_relation_size(%s::regclass)", [name])
            sizes[name] = int(cursor.fetchone()[0])
    for name, size in sizes.items():
        print(f"  {name:<40} {size / 1e9:8.2f} GB  ({size / records:,.0f} bytes a record)")
    total = sum(sizes.values())
    linear = sizes["records (partitions, indexes, TOAST)"] + sizes["results_recordkey"]
    print(
        f"disk: {total / 1e9:.2f} GB for {records:,} records; the records and their keys "
        f"{linear / records:,.0f} bytes a record, {linear / records * 1e8 / 1e9:.1f} GB per 100 million "
        f"(the rollups grow with minutes x flows, not records: {(total - linear) / 1e9:.2f} GB here)"
    )


class Memory:
    """The peak resident memory of this process while a call runs, above what it held before (sampled)."""

    def __init__(self) -> None:
        self.page = os.sysconf("SC_PAGE_SIZE")

    def rss(self) -> int:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * self.page

    def peak_of(self, call: Callable[[], object]) -> tuple[float, int]:
        before = peak = self.rss()
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.002):
                peak = max(peak, self.rss())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        began = time.perf_counter()
        try:
            call()
        finally:
            seconds = time.perf_counter() - began
            done.set()
            sampler.join()
        return seconds, max(peak, self.rss()) - before


def verdict(value: float, goal: float, unit: str = "ms") -> str:
    scale = 1000 if unit == "ms" else 1
    if value <= goal:
        return f"goal < {goal * scale:,.0f} {unit}: met"
    return f"goal < {goal * scale:,.0f} {unit}: MISSED by {(value - goal) * scale:,.0f} {unit} ({value / goal:.1f}x)"


class Timer:
    """Cold and warm medians of a call, with the goals beside them."""

    def __init__(self, repeat: int) -> None:
        from django.core.cache import cache

        self.cache, self.repeat, self.memory = cache, repeat, Memory()
        self.peak_memory = 0

    def runs(self, call: Callable[[], object], *, cold: bool) -> list[float]:
        timings = []
        if not cold:
            call()
        for _ in range(self.repeat):
            if cold:
                self.cache.clear()
            seconds, memory = self.memory.peak_of(call)
            timings.append(seconds)
            self.peak_memory = max(self.peak_memory, memory)
            if seconds > 20:  # one call says enough
                break
        return timings

    def report(self, label: str, call: Callable[[], object], *, cold_goal: float, warm_goal: float | None) -> None:
        self.peak_memory = 0
        for cold, goal in ((True, cold_goal), (False, warm_goal)):
            if goal is None:
                continue
            timings = self.runs(call, cold=cold)
            median = statistics.median(timings)
            print(
                f"{label + (', cold' if cold else ', warm'):<44} {median * 1000:8,.0f} ms "
                f"(min {min(timings) * 1000:,.0f}, max {max(timings) * 1000:,.0f}; {len(timings)})  "
                f"{verdict(median, goal)}",
                flush=True,
            )
        print(f"{'':<44} peak memory {self.peak_memory / 1e6:6.1f} MB  {verdict(self.peak_memory / 1e6, 200, 'MB')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="calls for each median")
    parser.add_argument("--messages", type=int, default=100_000, help="FTS messages posted for the ingest rates")
    parser.add_argument("--database", help="the bench's database (default: <DATABASE_URL's name>_scale)")
    parser.add_argument("--reuse", action="store_true", help="time the reads of an earlier run of --records again")
    args = parser.parse_args()
    database_url = bench_database(args.database)
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"  # the test client; gunicorn for ingest
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.core.management import call_command

    from challenges.models import Challenge

    call_command("migrate", verbosity=0)
    challenge = Challenge.objects.filter(slug="bench", name=f"Bench 2028, {args.records} records").first()
    if not (args.reuse and challenge):
        path, free = free_disk()
        need = (args.records / 1e8 * DISK_PER_100M + DISK_ROLLUPS) * DISK_MARGIN
        print(f"disk: {need / 1e9:.1f} GB needed ({DISK_PER_100M / 1e9:.0f} GB per 100 million records, measured, ")
        print(f"      {DISK_ROLLUPS / 1e9:.0f} GB of rollups at most, a quarter more for WAL and sorts); ")
        print(f"      {free / 1e9:.1f} GB free under {path}")
        if need > free:
            raise SystemExit(f"refused: not enough disk for {args.records:,} records ({need / 1e9:.0f} GB needed)")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        build(args.records)
        challenge = Challenge.objects.get(slug="bench")
    disk_report(args.records)
    from scale_reads import reads_time

    reads_time(challenge=challenge, timer=Timer(args.repeat), records=args.records)
    from scale_ingest import ingest_rates

    ingest_rates(database_url=database_url, messages=args.messages, goal=GOAL_INGEST)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
