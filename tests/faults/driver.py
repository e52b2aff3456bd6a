"""The fault suite's hands in a deployment of its own: `python -m tests.faults.driver COMMAND [JSON]` runs one
command against the database and broker its environment names (DATABASE_URL, CELERY_BROKER_URL) and prints JSON.
The suite's own process stays on the test database; every deployment it breaks is reached only through here, its
worker and beat processes, its web server and psycopg."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")


def _coordinator() -> Any:
    from django.contrib.auth import get_user_model

    from sites.roles import membership_grant

    user, created = get_user_model().objects.get_or_create(username="faults")
    if created:
        membership_grant(user=user, role="coordinator")
    return user


def setup(arguments: dict[str, Any]) -> dict[str, Any]:
    """The testbed's sites in the registry, a coordinator; with "demo": the demo challenge too."""
    from django.core.management import call_command

    from sites.services import sites_import
    from testbed.grid import Testbed, TestbedConfig

    sites_import(document=Testbed(TestbedConfig.from_settings()).sites_document())
    _coordinator()
    if arguments.get("demo"):
        call_command("load_demo", "--without-load", verbosity=0)  # no run of the suite's but its own
    return {}


def run(arguments: dict[str, Any]) -> dict[str, Any]:
    from runs.services import run_start

    started = run_start(user=_coordinator(), kind=arguments.get("kind", "transfer"), parameters=arguments["parameters"])
    return {"id": started.pk, "directory": started.directory}


def status(arguments: dict[str, Any]) -> dict[str, Any]:
    """A run's state, its files' states and the accounting the suite checks: ok records against distinct files."""
    from results.models import TransferRecord
    from runs.models import Run, RunFile

    found = Run.objects.get(pk=arguments["id"])
    files = Counter(RunFile.objects.filter(run=found).values_list("state", flat=True))
    ok = list(TransferRecord.objects.filter(run=found, state="ok").values_list("origin_id", flat=True))
    by_file = Counter(origin.split("-try")[0] for origin in ok)
    written = [url for urls in RunFile.objects.filter(run=found).values_list("written", flat=True) for url in urls]
    return {
        "state": found.state,
        "message": found.message,
        "copies": found.copies,
        "copies_message": found.copies_message,
        "finished_at": found.finished_at.isoformat() if found.finished_at else None,
        "files": dict(files),
        "ok_records": len(ok),
        "ok_files": len(by_file),
        "doubled": sum(count - 1 for count in by_file.values()),
        "attempts": sorted(RunFile.objects.filter(run=found).values_list("attempt", flat=True)),
        "errors": [error for error in RunFile.objects.filter(run=found).values_list("error", flat=True) if error][:5],
        "written": written,
        "destinations": list(RunFile.objects.filter(run=found).values_list("destination_url", flat=True)),
    }


def sweep(arguments: dict[str, Any]) -> dict[str, Any]:
    from sweeps.services import sweep_start

    started = sweep_start(user=_coordinator(), data=arguments["data"])
    return {"id": started.pk}


def sweep_status(arguments: dict[str, Any]) -> dict[str, Any]:
    from sweeps.models import Sweep

    found = Sweep.objects.get(pk=arguments["id"])
    steps = list(found.steps.order_by("index").values_list("state", "run_id"))
    return {"state": found.state, "steps": [state for state, _ in steps], "runs": [run for _, run in steps if run]}


def fts(arguments: dict[str, Any]) -> dict[str, Any]:
    """`count` FTS transfer-complete messages TB-T0 -> TB-T1-A of ATLAS, one a minute back from now, ingested."""
    from ingest.services import ingest_items
    from testbed.grid import Testbed, TestbedConfig

    bed = Testbed(TestbedConfig.from_settings())
    source, destination = bed.endpoint("t0.root").url, bed.endpoint("t1a.root").url
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    messages = []
    for number in range(int(arguments["count"])):
        end = now - timedelta(minutes=number)
        messages.append(
            {
                "tr_id": f"faults-{number}",
                "file_id": str(number),
                "job_id": "faults",
                "vo": "atlas",
                "activity": "T0 Export",  # the demo's T0 export counts FTS's transfers of this Rucio activity
                "src_url": f"{source}/faults/f{number}",
                "dst_url": f"{destination}/faults/f{number}",
                "tr_timestamp_start": int((end - timedelta(seconds=40)).timestamp() * 1000),
                "tr_timestamp_complete": int(end.timestamp() * 1000),
                "f_size": 4 * 10**9,
                "file_size": 4 * 10**9,
                "tr_bt_transfered": 4 * 10**9,
                "t_final_transfer_state": "Ok" if number % 10 else "Error",
                "t__error_message": "" if number % 10 else "TRANSFER [110] Operation timed out",
            }
        )
    result = ingest_items(format="fts", items=messages, user=None)
    return result.as_dict()


def rates(arguments: dict[str, Any]) -> dict[str, Any]:
    """The challenge's rates table as numbers (what `/results/SLUG/` shows), at the minute `at` (ISO 8601) when given:
    a running window's figures are so far, and two reads compare only at one minute."""
    from challenges.models import Challenge
    from results.selectors import challenge_rates

    at = datetime.fromisoformat(arguments["at"]) if arguments.get("at") else None
    rows = challenge_rates(challenge=Challenge.objects.get(slug=arguments["slug"]), at=at)
    return {
        "rows": [
            [row.target.pk, row.volume, row.average_rate, row.max_rate, row.stable_rate, row.files_ok, row.files_failed]
            for row in rows
        ]
    }


def token(arguments: dict[str, Any]) -> dict[str, Any]:
    """An API token of a coordinator (for the ingest API of the deployment's web server)."""
    from sites.tokens import token_issue

    _, key = token_issue(username="faults-api", role="coordinator", name="faults")
    return {"key": key}


COMMANDS = {
    "setup": setup,
    "run": run,
    "status": status,
    "sweep": sweep,
    "sweep-status": sweep_status,
    "fts": fts,
    "rates": rates,
    "token": token,
}


def main() -> None:
    import django

    django.setup()
    command, *rest = sys.argv[1:]
    arguments = json.loads(rest[0]) if rest else {}
    print(json.dumps(COMMANDS[command](arguments), default=str))


if __name__ == "__main__":
    main()
