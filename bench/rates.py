"""bench/rates: a challenge of the 2022 tape challenge's scale, then the time to build the rollups and the median
time of the rates API and of the FROM x TO matrix for the whole challenge.

    eval "$(bin/portal services | grep export)"
    .venv/bin/python bench/rates.py --records 10000000      # default; --records 1000000 for a quick look

It works in its own database (<DATABASE_URL's name>_bench, created and migrated here), never the portal's.
Shape: 3 experiments, 10 sites (a Tier-0 and nine Tier-1s), 3 weeks; each experiment exports from the Tier-0 to six
Tier-1s with a mode of its own, plus some Tier-1 -> Tier-1 traffic; 5 GB files of 30 s to 10 min; 3 % failures.
Prints figures only: the goal (under 300 ms at 10 million records) is judged by reading them. "cold" calls run
with the rates/matrix cache emptied before each call (this flushes the Redis database of REDIS_URL: use your
own), "warm" ones after a call that filled it. --reuse keeps the records and rollups of an earlier run of the
same size (generating 10 million records and building their rollups takes tens of minutes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def bench_database_url(name: str | None = None) -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit('set DATABASE_URL first: eval "$(bin/portal services | grep export)"')
    parts = urlsplit(url)
    name = name or parts.path.lstrip("/") + "_bench"
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"--database: letters, digits and _ only, not {name!r}")
    admin = urlunsplit(parts._replace(path="/postgres"))
    import psycopg

    with psycopg.connect(admin.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


GENERATE = """
INSERT INTO results_transferrecord
    (experiment_id, source_site_id, destination_site_id, bytes, start, "end", state, error_message,
     error_category, mode, concurrency, origin, origin_id, source_url, destination_url, transfer_key, source_host,
     destination_host, attempt, ddm_activity, fts_error_category, error_scope, failure_phase)
SELECT e.id, src.id, dst.id, 5000000000, s.start, s.start + s.duration,
       CASE WHEN s.i %% 33 = 0 THEN 'failed' ELSE 'ok' END,
       CASE WHEN s.i %% 33 = 0 THEN 'Connection timed out' ELSE '' END, '',
       (ARRAY['pull', 'push', 'streamed'])[1 + s.x %% 3], (ARRAY[10, 40, 100])[1 + s.x %% 3],
       'fts', 'bench-' || s.i, '', '', '', '', '', 1, '', '', '', ''
FROM (
    SELECT i, i %% 3 AS x,
           %(start)s::timestamptz + random() * %(span)s::interval AS start,
           interval '30 seconds' + random() * interval '570 seconds' AS duration,
           CASE WHEN i %% 10 < 8 THEN 0 ELSE 1 + (i / 10) %% 9 END AS src_index,
           1 + ((i / 3) %% 6 + (i %% 3) * 3) %% 9 AS dst_index
    FROM generate_series(1, %(records)s) AS i
) AS s
JOIN (SELECT id, row_number() OVER (ORDER BY name) - 1 AS n FROM sites_experiment) e ON e.n = s.x
JOIN (SELECT id, row_number() OVER (ORDER BY name) - 1 AS n FROM sites_site) src ON src.n = s.src_index
JOIN (SELECT id, row_number() OVER (ORDER BY name) - 1 AS n FROM sites_site) dst ON dst.n = s.dst_index
WHERE src.id <> dst.id
"""


def build(*, records: int, name: str, live: bool = False) -> tuple[Any, int, float, int, float]:
    """A fresh challenge of `records` generated records: (challenge, stored, generation s, rollup rows, build s).
    `live`: the challenge runs now (it began 10 days ago: its first week has ended, its second runs, its third is
    to come) and the records fill the 10 days up to now."""
    from datetime import UTC, datetime, timedelta

    from django.db import connection

    from challenges.models import Activity, Challenge, Target
    from results.store.attribution import records_attribute_all_sql
    from results.store.failure_counts import failure_counts_rebuild
    from results.store.link_intervals import link_intervals_rebuild
    from results.store.rollups import rollups_rebuild
    from sites.models import Experiment, Site

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE results_raterollup, results_raterolluphour, results_flowrollup, results_transferrecord, "
            "results_linktotals, results_linkinterval, results_linkerror, "
            "results_failurecount, results_failurehour, results_failuremessage, "
            "challenges_target, "
            "challenges_activity, challenges_challenge, sites_site_experiments, sites_site, "
            "sites_experiment CASCADE"
        )
    experiments = [Experiment.objects.create(name=label) for label in ("ATLAS", "CMS", "LHCb")]
    sites = [
        Site.objects.create(
            name=f"{index:02d}-{'T0' if index == 0 else 'T1'}", tier=0 if index == 0 else 1, country="CH"
        )
        for index in range(10)
    ]
    for site in sites:
        site.experiments.set(experiments)
    start = datetime(2022, 3, 7, tzinfo=UTC)
    if live:
        start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(days=10)
    challenge = Challenge.objects.create(name=name, slug="bench", start=start, end=start + timedelta(days=21))
    for index, experiment in enumerate(experiments):
        for week in range(3):
            activity = Activity.objects.create(
                challenge=challenge,
                name=f"{experiment.name} week {week + 1}",
                experiment=experiment,
                mode="DT" if week < 2 else "A-DT",
                kind="transfer",
                start=start + timedelta(days=7 * week),
                end=start + timedelta(days=7 * week + 7),
            )
            for site in sites[1 + index * 3 : 4 + index * 3]:
                Target.objects.create(activity=activity, site=site, direction="in", rate=1e9)
            Target.objects.create(activity=activity, link_from=sites[0], link_to=sites[1 + index * 3], rate=1e9)

    began = time.perf_counter()
    with connection.cursor() as cursor:
        span = timedelta(days=10) if live else timedelta(days=21)
        cursor.execute(GENERATE, {"records": records, "start": start, "span": span})
        stored = cursor.rowcount
        cursor.execute("ANALYZE results_transferrecord")
    generated = time.perf_counter() - began
    began = time.perf_counter()
    attributed = records_attribute_all_sql()  # the records count for their activities (results.store.attribution)
    print(f"attributed {attributed:,} records to the plan's activities in {time.perf_counter() - began:.1f} s")
    began = time.perf_counter()
    rows = rollups_rebuild()
    with connection.cursor() as cursor:
        for table in ("results_raterollup", "results_raterolluphour", "results_flowrollup"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    built = time.perf_counter() - began
    began = time.perf_counter()
    islands = link_intervals_rebuild()
    with connection.cursor() as cursor:
        for table in ("results_linktotals", "results_linkinterval", "results_linkerror"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    print(
        f"matrix unions rebuilt:     {islands:,} intervals in {time.perf_counter() - began:.1f} s (with VACUUM ANALYZE)"
    )
    began = time.perf_counter()
    failed = failure_counts_rebuild()
    print(f"failure counts rebuilt:    {failed:,} failed records in {time.perf_counter() - began:.1f} s")

    return challenge, stored, generated, rows, built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="API calls for the median")
    parser.add_argument("--database", help="the bench's database (default: <DATABASE_URL's name>_bench)")
    parser.add_argument(
        "--now",
        action="store_true",
        help="a challenge running now (begun 10 days ago) instead of 2022's; also times the now board and the alerts",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the challenge, records and rollups a previous run left in the database (same --records); "
        "the rollup build is then not timed",
    )
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = bench_database_url(args.database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from rest_framework.test import APIClient

    from challenges.models import Challenge, Target
    from results.models import RateRollup, TransferRecord

    call_command("migrate", verbosity=0)
    name = f"Bench {'now' if args.now else 2022}, {args.records} records"
    challenge = Challenge.objects.filter(slug="bench", name=name).first() if args.reuse else None
    if challenge is not None and TransferRecord.objects.exists():
        stored = TransferRecord.objects.count()
        rows = RateRollup.objects.count()
        print(f"records stored:            {stored:,} (reused from an earlier run)")
        print(f"rollup rows:               {rows:,}")
        print("rollup build:              not timed (reused)")
    else:
        challenge, stored, generated, rows, built = build(records=args.records, name=name, live=args.now)
        print(f"records stored:            {stored:,} (generated in {generated:.1f} s)")
        print(f"rollup rows:               {rows:,}")
        print(f"rollup build:              {built:.1f} s (rebuild of the rollups, with VACUUM ANALYZE)", flush=True)
    targets = Target.objects.filter(activity__challenge=challenge).count()

    user = get_user_model().objects.create_user(f"bench-{time.time_ns()}")
    user.is_superuser = True
    user.save()
    client = APIClient()
    client.force_authenticate(user)
    pages = Client()
    pages.force_login(user)
    from django.core.cache import cache
    from django.db import connection

    from results.targets.rates import challenge_targets, flow_minutes, targets_rates_compute

    def timed(call: Callable[[], object], *, cold: bool) -> list[float]:
        """Timings of `repeat` calls; cold: the cache emptied before each (not timed), warm: after one untimed
        call that fills it."""
        timings = []
        if not cold:
            call()
        for _ in range(args.repeat):
            if cold:
                cache.clear()
            began = time.perf_counter()
            call()
            timings.append(time.perf_counter() - began)
        return timings

    def report(label: str, timings: list[float]) -> None:
        print(
            f"{label:<42} median {statistics.median(timings) * 1000:5.0f} ms "
            f"(min {min(timings) * 1000:.0f}, max {max(timings) * 1000:.0f}; {len(timings)} calls)",
            flush=True,
        )

    def api_call() -> None:
        response = client.get("/api/v1/challenges/bench/rates/")
        assert response.status_code == 200, response.content[:300]
        assert len(response.json()["rows"]) == targets

    def matrix_call(**asked: str) -> None:
        response = pages.get("/results/bench/matrix/", {"format": "json", **asked})
        assert response.status_code == 200, response.content[:300]
        resolutions.add(response.json()["resolution"])

    resolutions: set[str] = set()

    # Where a cold call's time goes: the rollup query alone (executed and fetched in binary), then the whole
    # computation without the cache (query + Python), then the API (plus targets, versions, cache, JSON).
    target_list = list(challenge_targets(challenge=challenge))

    def query_only() -> None:
        flow_minutes(targets=target_list)

    print(
        f"load average before timing: {' '.join(f'{load:.2f}' for load in os.getloadavg())} on {os.cpu_count()} cores"
    )
    report(f"rollup query + binary fetch, {targets} targets", timed(query_only, cold=True))
    report(
        "rates computed, no cache (query + Python)",
        timed(
            lambda: targets_rates_compute(
                targets=target_list, max_window=challenge.max_window, stable_window=challenge.stable_window
            ),
            cold=True,
        ),
    )
    report(f"rates API, {targets} targets, cold", timed(api_call, cold=True))
    report(f"rates API, {targets} targets, warm", timed(api_call, cold=False))
    report("matrix (the page's JSON export), cold", timed(matrix_call, cold=True))
    report("matrix (the page's JSON export), warm", timed(matrix_call, cold=False))
    print(f"matrix resolution:         {', '.join(sorted(resolutions))}")
    report(
        "matrix split by mode and concurrency, cold",
        timed(lambda: matrix_call(split="mode,concurrency"), cold=True),
    )
    report(
        "matrix from the records (?resolution=records), cold",
        timed(lambda: matrix_call(resolution="records"), cold=True),
    )
    if args.now:
        from live.alerts import alerts_evaluate

        def now_call() -> None:
            response = client.get("/api/v1/challenges/bench/now/")
            assert response.status_code == 200, response.content[:300]
            assert len(response.json()["targets"]) == targets

        report(f"now board API, {targets} targets, cold (goal < 300 ms)", timed(now_call, cold=True))
        report(f"now board API, {targets} targets, warm", timed(now_call, cold=False))
        report("alerts evaluation of the challenge", timed(lambda: alerts_evaluate(challenge=challenge), cold=True))
    print(f"load average after timing:  {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    connection.close()


if __name__ == "__main__":
    main()
