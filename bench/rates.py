"""bench/rates: a challenge of the 2022 tape challenge's scale, then the time to build the rollups and the median
time of the rates API and of the FROM x TO matrix for the whole challenge.

    eval "$(bin/portal services | grep export)"
    .venv/bin/python bench/rates.py --records 10000000      # default; --records 1000000 for a quick look

It works in its own database (<DATABASE_URL's name>_bench, created and migrated here), never the portal's.
Shape: 3 experiments, 10 sites (a Tier-0 and nine Tier-1s), 3 weeks; each experiment exports from the Tier-0 to six
Tier-1s with a mode of its own, plus some Tier-1 -> Tier-1 traffic; 5 GB files of 30 s to 10 min; 3 % failures.
Prints figures only: the goal (under 300 ms at 10 million records) is judged by reading them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def bench_database_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit('set DATABASE_URL first: eval "$(bin/portal services | grep export)"')
    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_bench"
    admin = urlunsplit(parts._replace(path="/postgres"))
    import psycopg

    with psycopg.connect(admin.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


GENERATE = """
INSERT INTO results_transferrecord
    (experiment_id, source_site_id, destination_site_id, bytes, start, "end", state, error_message,
     error_category, mode, concurrency, origin, origin_id, source_url, destination_url)
SELECT e.id, src.id, dst.id, 5000000000, s.start, s.start + s.duration,
       CASE WHEN s.i %% 33 = 0 THEN 'failed' ELSE 'ok' END,
       CASE WHEN s.i %% 33 = 0 THEN 'Connection timed out' ELSE '' END, '',
       (ARRAY['pull', 'push', 'streamed'])[1 + s.x %% 3], (ARRAY[10, 40, 100])[1 + s.x %% 3],
       'fts', 'bench-' || s.i, '', ''
FROM (
    SELECT i, i %% 3 AS x,
           timestamptz '2022-03-07 00:00+00' + random() * interval '21 days' AS start,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5, help="API calls for the median")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = bench_database_url()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from datetime import UTC, datetime, timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from rest_framework.test import APIClient

    from challenges.models import Activity, Challenge, Target
    from results.rollups import rollups_rebuild
    from sites.models import Experiment, Site

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE results_raterollup, results_transferrecord, challenges_target, "
            "challenges_activity, challenges_challenge, sites_site_experiments, sites_site, "
            "sites_experiment CASCADE"
        )
    experiments = [Experiment.objects.create(name=name) for name in ("ATLAS", "CMS", "LHCb")]
    sites = [
        Site.objects.create(
            name=f"{index:02d}-{'T0' if index == 0 else 'T1'}", tier=0 if index == 0 else 1, country="CH"
        )
        for index in range(10)
    ]
    for site in sites:
        site.experiments.set(experiments)
    start = datetime(2022, 3, 7, tzinfo=UTC)
    challenge = Challenge.objects.create(name="Bench 2022", slug="bench", start=start, end=start + timedelta(days=21))
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
    targets = Target.objects.filter(activity__challenge=challenge).count()

    began = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(GENERATE, {"records": args.records})
        stored = cursor.rowcount
        cursor.execute("ANALYZE results_transferrecord")
    generated = time.perf_counter() - began
    began = time.perf_counter()
    rows = rollups_rebuild()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE results_raterollup")
        cursor.execute("VACUUM ANALYZE results_flowrollup")  # index-only scans need the visibility map
    built = time.perf_counter() - began

    user = get_user_model().objects.create_user(f"bench-{time.time_ns()}")
    user.is_superuser = True
    user.save()
    client = APIClient()
    client.force_authenticate(user)
    from results.rates import rates_for_challenge

    def timed(call: object) -> list[float]:
        timings = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            call()  # type: ignore[operator]
            timings.append(time.perf_counter() - began)
        return timings

    def api_call() -> None:
        response = client.get("/api/v1/challenges/bench/rates/")
        assert response.status_code == 200, response.content[:300]

    print(f"records stored:            {stored:,} (generated in {generated:.1f} s)")
    print(f"rollup rows:               {rows:,}")
    print(f"rollup build:              {built:.1f} s")
    selector = timed(lambda: rates_for_challenge(challenge=challenge))
    print(f"rates selector, {targets} targets: median {statistics.median(selector) * 1000:.0f} ms", flush=True)
    timings = timed(api_call)
    pages = Client()
    pages.force_login(user)

    def matrix_call() -> None:
        response = pages.get("/results/bench/matrix/", {"format": "json"})
        assert response.status_code == 200, response.content[:300]

    matrix = timed(matrix_call)
    print(
        f"rates API, {targets} targets: median {statistics.median(timings) * 1000:.0f} ms "
        f"(min {min(timings) * 1000:.0f}, max {max(timings) * 1000:.0f}; {args.repeat} calls)"
    )
    print(
        f"matrix (the page's JSON export): median {statistics.median(matrix) * 1000:.0f} ms "
        f"(min {min(matrix) * 1000:.0f}, max {max(matrix) * 1000:.0f}; {args.repeat} calls)"
    )


if __name__ == "__main__":
    main()
