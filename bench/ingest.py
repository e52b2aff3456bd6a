"""bench/ingest: FTS "transfer complete" messages (1 million by default) posted in batches of 5,000 to a real portal
server (gunicorn, two workers, as `bin/portal run` starts it) through POST /api/v1/ingest/fts/; in the same run a bare
psycopg COPY of the same rows into an unindexed table, and the STOMP path: as many other messages queued in a
private RabbitMQ and stored by two `manage.py consume` processes (batches of 5,000). Prints each rate with the load
average of the moment, the ratio of the API to the bare COPY and of STOMP to the API.

    eval "$(bin/portal services | grep export)"
    .venv/bin/python bench/ingest.py --messages 200000      # --stomp-messages 0: no STOMP; --consumers 1: one

It works in its own database (<DATABASE_URL's name>_ingest_bench, created and migrated here), never the portal's,
and empties its records first. The messages have every field of a real FTS3 message (the sample in
tests/ingest/samples.py), numbers as strings, 10 storage hosts of 5 sites, 3 % failures, and about 2.2 KB each.
The request bodies are made before the clock starts; the clock covers HTTP, parsing, dedupe, the insert and the
rollups. Prints figures only: the goals (>= 40,000 messages/s and >= 0.2 of the bare COPY over the API, STOMP >= 0.8
of the API) are judged by reading them.
"""

from __future__ import annotations

import argparse
import http.client
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HOSTS = [  # (site, host:port of its SRM/WebDAV door)
    ("CERN-PROD", "eosatlas.cern.ch:1094"),
    ("CERN-PROD", "srm-eosatlas.cern.ch:8443"),
    ("INFN-T1", "storm-fe.cr.cnaf.infn.it:8444"),
    ("INFN-T1", "xs-atlas.cr.cnaf.infn.it:1094"),
    ("UAM-LCG2", "grid002.ft.uam.es:8443"),
    ("UAM-LCG2", "xrootd.ft.uam.es:1094"),
    ("BNL-ATLAS", "dcgftp.usatlas.bnl.gov:443"),
    ("BNL-ATLAS", "dcdoor.usatlas.bnl.gov:1094"),
    ("TRIUMF-LCG2", "webdav.lcg.triumf.ca:2880"),
    ("TRIUMF-LCG2", "xrootd.lcg.triumf.ca:1094"),
]
T0_MS = 1_700_000_000_000


def bench_database_url(name: str | None) -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit('set DATABASE_URL first: eval "$(bin/portal services | grep export)"')
    parts = urlsplit(url)
    name = name or parts.path.lstrip("/") + "_ingest_bench"
    if not name.replace("_", "").isalnum():
        raise SystemExit(f"--database: letters, digits and _ only, not {name!r}")
    import psycopg

    admin = urlunsplit(parts._replace(path="/postgres")).replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def message(i: int) -> dict[str, Any]:
    """The i-th message: a real FTS3 message's fields (numbers as strings), its own ids, hosts, size and times."""
    source_site, source = HOSTS[i % 10]
    destination_site, destination = HOSTS[(i * 7 + 3) % 10]
    if source_site == destination_site:
        destination_site, destination = HOSTS[(i * 7 + 5) % 10]
    job = f"{i // 100:08x}-0132-51df-b341-3031a0a9ea39"
    name = f"EVNT.{11173001 + i // 1000}._{i % 1000:06d}.pool.root.1"
    size = 1_000_000_000 + (i * 7919) % 4_000_000_000
    start = T0_MS + (i * 604_800_000) // 1_000_000  # a week of transfers
    duration = 30_000 + (i * 104_729) % 570_000
    failed = i % 33 == 0
    src_url = f"davs://{source}/atlas/atlasdatadisk/rucio/mc15_13TeV/60/36/{name}"
    dst_url = f"davs://{destination}/atlas/atlasdatadisk/rucio/mc15_13TeV/60/36/{name}"
    return {
        "activity": "Data Consolidation",
        "block_size": "0",
        "buf_size": "0",
        "channel_type": "urlcopy",
        "chk_timeout": "0",
        "dst_hostname": destination.split(":")[0],
        "dst_se": f"davs://{destination.split(':')[0]}",
        "dst_site_name": destination_site,
        "dst_url": dst_url,
        "endpnt": "fts3.cern.ch",
        "f_size": str(size),
        "file_id": str(1461431003 + i),
        "file_metadata": {
            "activity": "Data Consolidation",
            "adler32": f"{i:08x}",
            "dst_rse": f"{destination_site}_DATADISK",
            "dst_type": "DISK",
            "filesize": str(size),
            "name": name,
            "request_id": f"{i:032x}",
            "request_type": "transfer",
            "scope": "mc15_13TeV",
            "src_rse": f"{source_site}_DATADISK",
            "src_type": "DISK",
            "verify_checksum": True,
        },
        "file_size": str(size),
        "ipv6": False,
        "job_id": job,
        "job_metadata": {"issuer": "rucio", "multi_sources": True},
        "job_state": "FAILED" if failed else "FINISHED",
        "latency": "9960",
        "log_link": f"https://fts3.cern.ch:8449/fts3/ftsmon/#/{job}",
        "nstreams": "1",
        "operation_time": str(duration),
        "remote_access": True,
        "retry": "0",
        "retry_max": "0",
        "src_hostname": source.split(":")[0],
        "src_se": f"davs://{source.split(':')[0]}",
        "src_site_name": source_site,
        "src_url": src_url,
        "t__error_message": "TRANSFER [110] TRANSFER Operation timed out" if failed else "",
        "t_channel": f"{source.split(':')[0]}__{destination.split(':')[0]}",
        "t_error_code": "110" if failed else "0",
        "t_failure_phase": "TRANSFER" if failed else "",
        "t_final_transfer_state": "Error" if failed else "Ok",
        "t_final_transfer_state_flag": "0" if failed else "1",
        "t_timeout": "621",
        "tcp_buf_size": "0",
        "timestamp_checksum_dest_ended": f"{start + duration + 36}.000000",
        "timestamp_checksum_dest_st": f"{start + duration}.000000",
        "timestamp_chk_src_ended": f"{start - 10}.000000",
        "timestamp_chk_src_st": f"{start - 134}.000000",
        "timestamp_tr_comp": f"{start + duration}.000000",
        "timestamp_tr_st": f"{start}.000000",
        "tr_bt_transfered": "0" if failed else str(size),
        "tr_error_category": "TRANSFER" if failed else "",
        "tr_error_scope": "TRANSFER" if failed else "",
        "tr_id": f"2023-11-14-2213__{source.split(':')[0]}__{destination.split(':')[0]}__{1461431003 + i}__{job}",
        "tr_timestamp_complete": f"{start + duration + 280}.000000",
        "tr_timestamp_start": f"{start - 200}.000000",
        "user": "",
        "user_dn": "",
        "vo": "atlas",
    }


def registry_setup() -> str:
    """ATLAS, the sites and their endpoints (with RSE names); a coordinator token. Returns the token's key."""
    from sites.models import Experiment, Site, StorageEndpoint
    from sites.tokens import token_issue

    atlas, _ = Experiment.objects.get_or_create(name="ATLAS")
    for tier, (site_name, hostport) in enumerate(HOSTS):
        site, _ = Site.objects.get_or_create(name=site_name, defaults={"tier": min(tier // 2, 2), "country": "CH"})
        site.experiments.add(atlas)
        url = f"davs://{hostport}/atlas"
        if not StorageEndpoint.objects.filter(url=url).exists():
            endpoint = StorageEndpoint(
                site=site, rse_names=[f"{site_name}_DATADISK"] if hostport[-4:] != "1094" else []
            )
            endpoint.set_url(url)
            endpoint.save()
    _token, key = token_issue(username="bench-coordinator", role="coordinator", name="bench/ingest")
    return key


def plan_setup(activities: int) -> None:
    """A challenge over the messages' week with `activities` ATLAS activities whose targets the messages' flows hit
    (into INFN-T1, out of CERN-PROD, the link BNL-ATLAS -> UAM-LCG2, ...), one of them naming the messages' DDM
    activity: every batch is attributed for real (results.store.attribution), as in a challenge."""
    from datetime import UTC, datetime, timedelta

    from challenges.models import Activity, Challenge, Target
    from sites.models import Experiment, Site

    Challenge.objects.filter(slug="bench-ingest").delete()
    if not activities:
        return
    atlas = Experiment.objects.get(name="ATLAS")
    start = datetime.fromtimestamp(T0_MS / 1000, UTC).replace(minute=0, second=0, microsecond=0)
    challenge = Challenge.objects.create(
        name="bench ingest", slug="bench-ingest", start=start, end=start + timedelta(days=8)
    )
    sites = {site.name: site for site in Site.objects.all()}
    places = [("INFN-T1", "in"), ("CERN-PROD", "out"), ("UAM-LCG2", "in"), ("BNL-ATLAS", "out")]
    for index in range(activities):
        activity = Activity.objects.create(
            challenge=challenge,
            name=f"ATLAS activity {index}",
            experiment=atlas,
            mode="T0 export",
            kind="transfer",
            start=challenge.start,
            end=challenge.end,
            ddm_activities=["Data Consolidation"] if index == 0 else [],
        )
        site, direction = places[index % len(places)]
        Target.objects.create(activity=activity, site=sites[site], direction=direction, rate=1e9)
        Target.objects.create(activity=activity, link_from=sites["BNL-ATLAS"], link_to=sites["UAM-LCG2"], rate=1e9)


def records_empty() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "TRUNCATE results_transferrecord, results_recordkey, results_raterollup, results_raterolluphour, "
            "results_flowrollup, results_rollupversion, results_linktotals, results_linkinterval, results_linkerror, "
            "results_failurecount, results_failurehour, results_failuremessage"
        )
        cursor.execute("DROP TABLE IF EXISTS bench_copy")


def server_start(port: int, database_url: str, workers: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": database_url, "LOG_LEVEL": "WARNING"}
    argv = [sys.executable, "-m", "gunicorn", "portal.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", str(workers)]
    argv += ["--timeout", "120"]
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    from common.processes import wait_for_port

    if not wait_for_port(port, timeout=30, pid=process.pid):
        process.kill()
        raise SystemExit(f"gunicorn did not start: see {log}")
    return process


def server_warm(port: int, key: str, workers: int) -> None:
    """Before the clock: every worker has served a batch (an empty one), so that no worker's start-up (importing
    Django and the apps, the first request's lazy imports) is counted as ingest time or CPU: a portal's server runs
    for days. Sync workers serve one connection each, so `workers` concurrent posts reach every one of them."""
    barrier = threading.Barrier(workers * 2)

    def post() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}
        for _ in range(3):
            connection.request("POST", "/api/v1/ingest/fts/", body=b"[]", headers=headers)
            connection.getresponse().read()
        barrier.wait()
        connection.close()

    threads = [threading.Thread(target=post) for _ in range(workers * 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def post_all(bodies: list[bytes], *, port: int, key: str, clients: int) -> tuple[float, dict[str, int]]:
    """Post every body from `clients` threads (one keep-alive connection each); returns (seconds, totals)."""
    work: queue.Queue[bytes] = queue.Queue()
    for body in bodies:
        work.put(body)
    totals = {"accepted": 0, "duplicates": 0, "skipped": 0, "rejected": 0}
    lock = threading.Lock()
    failures: list[str] = []

    def client() -> None:
        import orjson

        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        headers = {"Authorization": f"Token {key}", "Content-Type": "application/json"}
        while True:
            try:
                body = work.get_nowait()
            except queue.Empty:
                break
            connection.request("POST", "/api/v1/ingest/fts/", body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            if response.status != 200:
                failures.append(f"{response.status}: {data[:300]!r}")
                break
            result = orjson.loads(data)
            with lock:
                for name in ("accepted", "duplicates", "skipped"):
                    totals[name] += result[name]
                totals["rejected"] += len(result["rejected"])
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if failures:
        raise SystemExit(f"the server refused a batch: {failures[0]}")
    return seconds, totals


def bare_copy(messages: int, batch: int) -> float:
    """Seconds of a bare psycopg COPY of the same rows (the records the parser makes of the same messages) into
    an unindexed table, in batches like the API's; making the rows is outside the clock."""
    from django.db import connection

    from ingest.parsers import Registry, parse_fts
    from results.services import RECORD_COLUMNS, _record_values

    registry = Registry.load()
    columns = ", ".join(f'"{column}"' for column in RECORD_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE bench_copy AS SELECT {columns} FROM results_transferrecord WITH NO DATA")
    connection.commit() if not connection.get_autocommit() else None
    raw = connection.connection
    seconds = 0.0
    for first in range(0, messages, batch):
        rows = [_record_values(parse_fts(message(i), registry)) for i in range(first, min(first + batch, messages))]
        began = time.perf_counter()
        with raw.cursor() as cursor, cursor.copy(f"COPY bench_copy ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        raw.commit()
        seconds += time.perf_counter() - began
    return seconds


def load_average() -> str:
    """The machine's load average (1, 5, 15 minutes), printed with every figure: other work moves them all."""
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a live process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(*, parents: list[int], database: str) -> tuple[float, float]:
    """CPU seconds so far of the children of `parents` (gunicorn's workers, or the consumers themselves) and of the
    PostgreSQL backends connected to `database` but this process's: what the work cost, whatever else runs on the
    machine (the wall-clock rates move with the load, the CPU per message much less)."""
    from django.db import connection

    children = [int(pid) for pid in os.listdir("/proc") if pid.isdigit()]
    python = 0.0
    for pid in children:
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid in parents:
            python += _cpu_seconds(pid)
    python += sum(_cpu_seconds(pid) for pid in parents if pid != os.getpid())
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [database])
        backends = [row[0] for row in cursor.fetchall()]
    return python, sum(_cpu_seconds(pid) for pid in backends)


def cpu_text(*, python: float, postgres: float, messages: int) -> str:
    per_message = (python + postgres) / messages * 1e6
    return (
        f"CPU per message {per_message:.0f} us (Python {python / messages * 1e6:.0f}, PostgreSQL "
        f"{postgres / messages * 1e6:.0f}): {2e6 / per_message:,.0f} messages/s on 2 idle cores at most"
    )


def files_stored() -> int:
    """Records stored so far, from the hourly rollup (every bench message ends ok or failed): a read of a few
    thousand rows, cheap enough to poll while the consumer works, where a count of the records would not be."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(sum(files_ok + files_failed), 0) FROM results_raterolluphour")
        return int(cursor.fetchone()[0])


def stomp_run(*, database_url: str, first: int, messages: int, batch: int, consumers: int) -> tuple[float, int, str]:
    """The STOMP path: `messages` FTS messages (from the `first`-th, one JSON message per STOMP message as FTS
    publishes them) queued in a private RabbitMQ (tests/ingest/broker.py) before the clock starts, then `consumers`
    processes of `manage.py consume` (batches of `batch`) on the queue. The clock runs from the first batch stored
    (the consumers' start-up is left out) to the last; returns (messages/s, messages stored, their CPU)."""
    import orjson
    from scale_stomp import QUEUE, _publish, _rabbit

    rabbit = _rabbit(ROOT / "var" / "bench-ingest-rabbitmq")
    rabbit.start()
    logs, processes = [], []
    try:
        _publish(rabbit.stomp_port, [orjson.dumps(message(i)) for i in range(first, first + messages)])
        before = files_stored()
        argv = [sys.executable, "manage.py", "consume", "--format", "fts", "--destination", QUEUE]
        argv += ["--port", str(rabbit.stomp_port), "--user", "guest", "--password", "guest"]
        argv += ["--batch", str(batch), "--flush-seconds", "0.5"]
        env = {**os.environ, "DATABASE_URL": database_url, "LOG_LEVEL": "WARNING"}
        for index in range(consumers):
            logs.append((ROOT / "var" / f"bench-ingest-consume-{index}.log").open("wb"))
            processes.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=logs[-1], stderr=subprocess.STDOUT))
        started: tuple[float, int] | None = None
        stored, deadline = 0, time.monotonic() + 900
        pids, database = [process.pid for process in processes], database_url.rsplit("/", 1)[1]
        while stored < messages and time.monotonic() < deadline:
            time.sleep(0.05)
            stored = files_stored() - before
            if stored and started is None:
                started = (time.monotonic(), stored)
                cpu_started = cpu_of(parents=pids, database=database)
        if started is None or stored <= started[1]:
            return 0.0, stored, ""
        seconds = time.monotonic() - started[0]
        python, postgres = cpu_of(parents=pids, database=database)
        python, postgres = python - cpu_started[0], postgres - cpu_started[1]
        cpu = cpu_text(python=python, postgres=postgres, messages=stored - started[1])
        return (stored - started[1]) / seconds, stored, cpu
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=60)
        for log in logs:
            log.close()
        rabbit.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (bin/portal run starts 2)")
    parser.add_argument("--clients", type=int, default=2, help="concurrent posting connections")
    parser.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    parser.add_argument("--database", default=None, help="database name (default: <DATABASE_URL name>_ingest_bench)")
    parser.add_argument("--activities", type=int, default=4, help="plan activities the records are attributed to")
    parser.add_argument(
        "--stomp-messages", type=int, default=None, help="messages through STOMP (default: --messages; 0: none)"
    )
    parser.add_argument("--consumers", type=int, default=2, help="manage.py consume processes on the STOMP queue")
    args = parser.parse_args()

    database_url = bench_database_url(args.database)
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    import orjson
    from django.core.management import call_command
    from django.db import connection

    from common.processes import free_port

    call_command("migrate", verbosity=0)
    records_empty()
    key = registry_setup()
    plan_setup(args.activities)
    connection.close()

    began = time.perf_counter()
    bodies = [
        orjson.dumps([message(i) for i in range(first, min(first + args.batch, args.messages))])
        for first in range(0, args.messages, args.batch)
    ]
    size = sum(len(body) for body in bodies)
    print(
        f"messages: {args.messages:,} in {len(bodies)} batches of {args.batch:,} "
        f"({size / args.messages:,.0f} bytes each, {size / 1e9:.2f} GB; made in {time.perf_counter() - began:.1f} s)"
    )
    print(f"load average before: {load_average()} (other work on the machine moves every figure)")
    port = args.port or free_port(18700)
    log = ROOT / "var" / "bench-ingest-gunicorn.log"
    log.parent.mkdir(exist_ok=True)
    server = server_start(port, database_url, args.workers, log)
    database = database_url.rsplit("/", 1)[1]
    try:
        server_warm(port, key, args.workers)
        cpu_started = cpu_of(parents=[server.pid], database=database)
        seconds, totals = post_all(bodies, port=port, key=key, clients=args.clients)
        python, postgres = cpu_of(parents=[server.pid], database=database)
        python, postgres = python - cpu_started[0], postgres - cpu_started[1]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    del bodies
    from django.db.models import Sum

    from results.models import RateRollup, TransferRecord

    stored = TransferRecord.objects.count()
    files = RateRollup.objects.aggregate(ok=Sum("files_ok"), failed=Sum("files_failed"))
    api_rate = args.messages / seconds
    print(
        f"API: {seconds:.1f} s, {api_rate:,.0f} messages/s "
        f"({args.workers} gunicorn workers, {args.clients} clients; load average {load_average()}); "
        f"accepted {totals['accepted']:,}, duplicates {totals['duplicates']:,}, rejected {totals['rejected']:,}"
    )
    print(f"API {cpu_text(python=python, postgres=postgres, messages=args.messages)}")
    print(f"stored: {stored:,} records; rollup files ok {files['ok']:,}, failed {files['failed']:,}")
    attributed = TransferRecord.objects.filter(activity__isnull=False).count()
    print(f"attributed to the plan's {args.activities} activities: {attributed:,} records")
    copy_seconds = bare_copy(args.messages, args.batch)
    copy_rate = args.messages / copy_seconds
    print(
        f"bare COPY of the same rows into an unindexed table: {copy_seconds:.1f} s, {copy_rate:,.0f} rows/s "
        f"(load average {load_average()})"
    )
    print(
        f"ratio API / bare COPY: {api_rate / copy_rate:.2f}  (goals: >= 40,000 messages/s and >= 0.2); "
        f"load average {load_average()}"
    )
    stomp_messages = args.messages if args.stomp_messages is None else args.stomp_messages
    if stomp_messages:
        connection.close()
        stomp_rate, stomp_stored, stomp_cpu = stomp_run(
            database_url=database_url,
            first=args.messages,
            messages=stomp_messages,
            batch=args.batch,
            consumers=args.consumers,
        )
        print(
            f"STOMP: {stomp_rate:,.0f} messages/s ({args.consumers} consumers, batches of {args.batch:,}; "
            f"stored {stomp_stored:,} of {stomp_messages:,}); ratio STOMP / API: {stomp_rate / api_rate:.2f} "
            f"(goal: >= 0.8); load average {load_average()}"
        )
        print(f"STOMP {stomp_cpu}")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
