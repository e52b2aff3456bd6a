"""A challenge running now with two hours of FTS traffic, as the issue's test describes it: one link steadily under
its target, one whose throughput dropped to a fifth in its last 20 minutes, and one site target whose traffic
stopped 30 minutes ago. Every record moves its bytes over one whole minute, so the arithmetic is exact."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from challenges.models import Activity, Challenge, Target
from ingest.services import ingest_items
from live.now import board_minute
from sites.models import Experiment, Site, StorageEndpoint

MB = 10**6
STEADY = 60 * MB  # bytes a minute: 1 MB/s


def door(site: Site, url: str) -> StorageEndpoint:
    item = StorageEndpoint(site=site, rse_names=[])
    item.set_url(url)
    item.save()
    return item


@dataclass
class Scenario:
    at: datetime
    challenge: Challenge
    activity: Activity
    steady: Target  # A -> B, 1 MB/s for two hours, target 2 MB/s
    dropped: Target  # A -> C, 1 MB/s, then 0.2 MB/s for the last 20 minutes, target 0.5 MB/s
    stopped: Target  # into D, 1 MB/s until 30 minutes ago, target 0.1 MB/s
    sites: dict[str, Site]
    doors: dict[str, str]


def site_with_door(name: str) -> tuple[Site, str]:
    site = Site.objects.create(name=f"LIVE-{name}", tier=1)
    url = f"root://{name.lower()}.live.example.org:1094//data"
    door(site, url)
    return site, url


def fts(number: int, source: str, destination: str, end: datetime, size: float, *, state: str = "Ok") -> dict[str, Any]:
    return {
        "tr_id": f"live-{number}",
        "job_id": "live",
        "file_id": str(number),
        "vo": "atlas",
        "src_url": f"{source}/f{number}",
        "dst_url": f"{destination}/f{number}",
        "tr_timestamp_start": int((end - timedelta(seconds=60)).timestamp() * 1000),
        "tr_timestamp_complete": int(end.timestamp() * 1000),
        "f_size": int(size),
        "tr_bt_transfered": int(size) if state == "Ok" else 0,
        "t_final_transfer_state": state,
        "t__error_message": "" if state == "Ok" else "TRANSFER [110] Operation timed out",
    }


def scenario_make(*, now: datetime | None = None, hours: float = 2) -> Scenario:
    at = board_minute(now)
    atlas = Experiment.objects.get_or_create(name="ATLAS")[0]
    made = {name: site_with_door(name) for name in "ABCD"}
    for site, _ in made.values():
        site.experiments.add(atlas)
    sites = {name: site for name, (site, _) in made.items()}
    doors = {name: url for name, (_, url) in made.items()}
    challenge = Challenge.objects.create(
        name="Live", slug="live", start=at - timedelta(days=1), end=at + timedelta(days=1)
    )
    activity = Activity.objects.create(
        challenge=challenge,
        name="ATLAS export",
        experiment=atlas,
        mode="T0",
        kind="transfer",
        start=at - timedelta(hours=hours),
        end=at + timedelta(hours=hours),
        source=sites["A"],
    )
    steady = Target.objects.create(activity=activity, link_from=sites["A"], link_to=sites["B"], rate=2 * MB)
    dropped = Target.objects.create(activity=activity, link_from=sites["A"], link_to=sites["C"], rate=0.5 * MB)
    stopped = Target.objects.create(activity=activity, site=sites["D"], direction="in", rate=0.1 * MB)
    messages, number = [], 0
    for minutes_ago in range(1, int(hours * 60) + 1):
        end = at - timedelta(minutes=minutes_ago - 1)  # the record moves minute [end - 60 s, end)
        messages.append(fts(number := number + 1, doors["A"], doors["B"], end, STEADY))
        messages.append(
            fts(number := number + 1, doors["A"], doors["C"], end, STEADY / 5 if minutes_ago <= 20 else STEADY)
        )
        if minutes_ago > 30:
            messages.append(fts(number := number + 1, doors["A"], doors["D"], end, STEADY))
    result = ingest_items(format="fts", items=messages, user=None)
    assert result.accepted == len(messages), result.as_dict()
    return Scenario(at, challenge, activity, steady, dropped, stopped, sites, doors)
