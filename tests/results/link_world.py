"""A challenge of three activities (two ATLAS ones whose windows overlap, one CMS) on three sites, and random
records across it: the world of the tests of the matrix's unions and of the failure causes' counts."""

from __future__ import annotations

import itertools
import random
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection

from challenges.models import Activity, Challenge, Target
from results.models import TransferRecord
from results.services import records_store
from runs.models import Run
from sites.models import Experiment, Site

T0 = datetime(2023, 5, 8, tzinfo=UTC)
GB = 10**9
_ids = itertools.count()
MESSAGES = ["", "Connection timed out", "Checksum mismatch", "TRANSFER [5] No such file", "a" * 400]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def make_world() -> dict[str, Any]:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    sites = [Site.objects.create(name=name, tier=1, country="CH") for name in ("CERN", "CNAF", "KIT")]
    challenge = Challenge.objects.create(name="DC", slug="dc", start=T0, end=T0 + timedelta(days=2))
    activities = []
    # Two ATLAS activities whose windows overlap, one CMS: records across an edge count whole for one of them.
    for experiment, start, end in ((atlas, 0, 86400), (atlas, 43200, 172800), (cms, 0, 172800)):
        activity = Activity.objects.create(
            challenge=challenge,
            name=f"{experiment.name} {start}",
            experiment=experiment,
            mode="T1-T1",
            kind="transfer",
            start=at(start),
            end=at(end),
        )
        for source, destination in itertools.permutations(sites, 2):
            Target.objects.create(activity=activity, link_from=source, link_to=destination, rate=GB)
        activities.append(activity)
    runs = [Run.objects.create(activity=activities[0], kind="transfer") for _ in range(2)]
    return {"atlas": atlas, "cms": cms, "sites": sites, "challenge": challenge, "activities": activities, "runs": runs}


def random_record(world: dict[str, Any], rng: random.Random) -> TransferRecord:
    """A transfer of 0 s to 3 h (a few of no length), often overlapping others of its link, some across the
    activities' windows or outside them, some of an unknown site, ok / failed / cancelled, some of a portal run."""
    start = rng.uniform(-7200, 180000)
    duration = rng.choice([0, 0.000001, rng.uniform(1, 600), rng.uniform(600, 10800)])
    state = rng.choices(["ok", "failed", "cancelled"], weights=[8, 3, 1])[0]
    source, destination = (
        rng.sample([*world["sites"], None], 2) if rng.random() < 0.1 else rng.sample(world["sites"], 2)
    )
    run = rng.choice(world["runs"]) if rng.random() < 0.1 else None
    return TransferRecord(
        experiment=world["cms"] if rng.random() < 0.3 else world["atlas"],
        source_site=source,
        destination_site=destination,
        bytes=rng.randrange(0, 5 * GB) if state == "ok" else rng.choice([0, 10**6]),
        start=at(start),
        end=at(start + duration),
        state=state,
        error_message=rng.choice(MESSAGES) if state == "failed" else "",
        mode=rng.choice(["pull", "push", ""]),
        concurrency=rng.choice([None, 10, 40]),
        origin="probe",
        origin_id=f"r{next(_ids)}",
        run=run,
        activity=world["activities"][0] if run else None,  # a run's records count for its activity
    )


def batches_stored_at_once(batches: list[list[TransferRecord]]) -> list[BaseException]:
    """Store each batch through records_store on a connection of its own, all released at once by a barrier;
    the errors they raised (none when all went well)."""
    barrier = threading.Barrier(len(batches))
    errors: list[BaseException] = []

    def store(batch: list[TransferRecord]) -> None:
        try:
            barrier.wait(10)
            records_store(records=batch)
        except BaseException as exc:  # given back to the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=store, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors
