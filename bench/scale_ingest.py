"""bench/scale's ingest: FTS messages posted to a real gunicorn (two workers, bench/ingest.py's machinery) into
the full table of bench/scale and into an empty database, with attribution to a plan, and the STOMP consumer into
the full table (bench/scale_stomp.py); imported by bench/scale.py.
The messages' records are taken out of the full table again afterwards (records, keys, rollups, plan)."""

from __future__ import annotations

import signal
import sys
from datetime import date
from typing import Any

CUTOFF = "2024-01-01"  # bench/ingest.py's messages end in November 2023; bench/scale's records are recent


def bench_ingest() -> Any:
    """bench/ingest.py as a module of its own name (the name `ingest` is the app's)."""
    import importlib.util
    from pathlib import Path

    if "bench_ingest" not in sys.modules:
        spec = importlib.util.spec_from_file_location("bench_ingest", Path(__file__).with_name("ingest.py"))
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_ingest"] = module
        spec.loader.exec_module(module)
    return sys.modules["bench_ingest"]


def _switch(database: str) -> None:
    from django.db import connections

    connections["default"].close()
    connections["default"].settings_dict["NAME"] = database


def _post(database_url: str, messages: int) -> tuple[float, dict[str, int]]:
    import orjson
    from django.db import connection

    from common.processes import free_port

    bench = bench_ingest()
    key = bench.registry_setup()
    bench.plan_setup(4)
    connection.close()
    bodies = [
        orjson.dumps([bench.message(i) for i in range(first, min(first + 5000, messages))])
        for first in range(0, messages, 5000)
    ]
    port = free_port(18900)
    server = bench.server_start(port, database_url, 2, bench.ROOT / "var" / "bench-scale-gunicorn.log")
    try:
        bench.server_warm(port, key, 2)  # no worker's start-up inside the clock
        seconds, totals = bench.post_all(bodies, port=port, key=key, clients=2)
        if totals["accepted"] + totals["duplicates"] + totals["skipped"] != messages:
            raise SystemExit(f"the server did not take every message: {totals}; see var/bench-scale-gunicorn.log")
        return seconds, totals
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def _clean_full() -> None:
    from django.db import connection

    from challenges.models import Challenge
    from results.store.keys import ORIGIN_KEY, TRANSFER_KEY
    from results.store.partitions import partition_name, partitions_list

    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM results_recordkey WHERE key IN (SELECT {ORIGIN_KEY.format(r='r')} FROM "
            f'results_transferrecord r WHERE r."end" < %s UNION ALL SELECT {TRANSFER_KEY.format(r="r")} FROM '
            f"results_transferrecord r WHERE r.\"end\" < %s AND r.transfer_key <> '')",
            [CUTOFF, CUTOFF],
        )
        # The months the messages made are dropped whole (a DELETE would leave dead rows for the reads to skip).
        for month in partitions_list():
            if month < date.fromisoformat(CUTOFF):
                cursor.execute(f"DROP TABLE {partition_name(month)}")
        cursor.execute('DELETE FROM results_transferrecord WHERE "end" < %s', [CUTOFF])
        cursor.execute("DELETE FROM results_raterollup WHERE minute < %s", [CUTOFF])
        cursor.execute("DELETE FROM results_raterolluphour WHERE hour < %s", [CUTOFF])
        cursor.execute("DELETE FROM results_flowrollup WHERE hour < %s", [CUTOFF])
    Challenge.objects.filter(slug="bench-ingest").delete()


def ingest_rates(*, database_url: str, messages: int, goal: float) -> None:
    from django.core.management import call_command
    from django.db import connection
    from scale import verdict

    bench = bench_ingest()

    full = connection.settings_dict["NAME"]
    print(f"ingest: {messages:,} FTS messages in batches of 5,000, 2 gunicorn workers, 2 clients, attributed")
    results: dict[str, Any] = {}
    try:
        seconds, totals = _post(database_url, messages)
        results["full"] = messages / seconds
        print(f"  into the full table:  {seconds:6.1f} s, {messages / seconds:8,.0f} messages/s, {totals}")
    finally:
        _clean_full()
    from scale_stomp import stomp_rate

    try:
        rate, stored = stomp_rate(database_url=database_url, messages=messages, cutoff=CUTOFF, root=bench.ROOT)
        results["STOMP consumer, full"] = rate
        print(f"  STOMP consumer (manage.py consume, batches of 5,000) into the full table: {rate:8,.0f} messages/s")
        if stored < messages:
            print(f"  (it stored {stored:,} of {messages:,} in 10 minutes)")
    finally:
        _clean_full()
    empty_url = bench.bench_database_url(full + "_empty")
    _switch(full + "_empty")
    try:
        call_command("migrate", verbosity=0)
        bench.records_empty()
        seconds, totals = _post(empty_url, messages)
        results["empty"] = messages / seconds
        print(f"  into an empty table:  {seconds:6.1f} s, {messages / seconds:8,.0f} messages/s, {totals}")
    finally:
        _switch(full)
    for name, rate in results.items():
        print(f"  {name}: {verdict(-rate, -goal, 'messages/s').replace('< -', '>= ').replace('-', '')}")
    print(f"  API, full / empty: {results['full'] / results['empty']:.2f}")
