"""bench/agent_claim: how soon a site's agent waiting in a long poll gets a job the portal offers, and what an idle
agent costs the portal. Prints the latency from the offer's commit to the agent holding the job (median, 90th
percentile, max over `--rounds`), and the CPU seconds the portal's gunicorn spent over `--idle` s of one agent
polling with nothing to do.

    eval "$(bin/portal services | grep export)"        # or your own DATABASE_URL and REDIS_URL
    .venv/bin/python bench/agent_claim.py --rounds 30 --idle 60

Works in its own database (<DATABASE_URL's name>_bench_agent, created and migrated here) and starts its own
gunicorn (1 worker, 8 threads) on a free port; the agent's side is agent.portal.Portal, the client the agent uses.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import threading
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
    name = parts.path.lstrip("/") + "_bench_agent"
    import psycopg

    admin = urlunsplit(parts._replace(path="/postgres")).replace("postgres://", "postgresql://", 1)
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU so far of a process and its live children (gunicorn's workers), from /proc."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0.0
    for each in [pid, *map(int, children)]:
        fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        total += sum(int(value) for value in fields[11:13]) / os.sysconf("SC_CLK_TCK")
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--idle", type=float, default=60.0)
    options = parser.parse_args()
    os.environ["DATABASE_URL"] = bench_database_url()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from agent.config import config_from
    from agent.portal import Portal
    from common import processes
    from runs.jobs import agent_job_offer
    from runs.models import Run
    from sites.agents import agent_enroll
    from sites.models import Site, SiteAgent

    call_command("migrate", verbosity=0)
    site, _ = Site.objects.get_or_create(name="BENCH-SITE", defaults={"tier": 1, "country": "IT"})
    SiteAgent.objects.filter(site=site).delete()
    _, key = agent_enroll(site=site)
    port = processes.free_port(28500)
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "portal.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "8",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert processes.wait_for_port(port, pid=web.pid, timeout=30)
        portal = Portal(
            config_from(
                {"portal_url": f"http://127.0.0.1:{port}", "site": site.name, "key": key, "spool": "/tmp/unused"}
            )
        )
        latencies = [_round(portal, site, Run, agent_job_offer) for _ in range(options.rounds)]
        latencies.sort()
        print(
            f"claim latency over {len(latencies)} offers: median {statistics.median(latencies) * 1000:.0f} ms, "
            f"p90 {latencies[int(0.9 * (len(latencies) - 1))] * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
        )
        before, start = cpu_seconds(web.pid), time.monotonic()
        while time.monotonic() - start < options.idle:
            portal.claim(most=1, wait=min(25.0, options.idle - (time.monotonic() - start)))
        used = cpu_seconds(web.pid) - before
        print(
            f"one idle agent polling for {options.idle:.0f} s: gunicorn used {used:.2f} CPU s "
            f"({used / options.idle * 100:.1f} % of a core); load average {os.getloadavg()[0]:.2f}"
        )
    finally:
        web.terminate()
        web.wait(10)


def _round(portal: object, site: object, run_model: type, offer: object) -> float:
    """One long poll already waiting when the job is offered: seconds from the offer's commit to the agent's hands."""
    got: dict[str, float] = {}

    def claim() -> None:
        jobs = portal.claim(most=1, wait=25.0)  # type: ignore[attr-defined]
        got["at"] = time.monotonic()
        got["jobs"] = len(jobs)

    claimer = threading.Thread(target=claim)
    claimer.start()
    time.sleep(random.uniform(0.5, 1.5))
    run = run_model.objects.create(kind="network", state="queued", parameters={})  # type: ignore[attr-defined]
    offered = time.monotonic()
    offer(queue=f"agent.{site.name}", kind="prepare", run_id=run.pk)  # type: ignore[attr-defined,operator]
    claimer.join(30)
    assert got.get("jobs") == 1, got
    return got["at"] - offered


if __name__ == "__main__":
    main()
