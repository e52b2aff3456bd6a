"""The demo: a coordinator account to log in with, the local testbed's sites in the registry, and a small
challenge on them that runs this week (two experiments oversubscribe the tape site on purpose)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from challenges.plan import PlanImportSummary, plan_import
from sites.choices import Role
from sites.documents import sites_document_load
from sites.roles import membership_grant
from sites.services import ImportSummary, sites_import
from testbed.grid.config import TestbedConfig


def demo_password() -> str:
    """The demo password, generated once into DEMO_PASSWORD_FILE so that no password lives in the repo."""
    path = Path(settings.DEMO_PASSWORD_FILE)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


def demo_user_ensure() -> tuple[str, str]:
    """Create or refresh the demo account (a coordinator, staff for the admin) and return its login."""
    username, password = settings.DEMO_USERNAME, demo_password()
    user, _ = get_user_model().objects.get_or_create(username=username)
    user.is_staff = True
    # A new hash (a new salt) would log out every demo session at each start: set it only when it changed.
    if not user.check_password(password):
        user.set_password(password)
    user.save()
    membership_grant(user=user, role=Role.COORDINATOR)
    return username, password


def demo_sites_load() -> ImportSummary | None:
    """Import the sites document the running testbed wrote (None when the testbed never ran here)."""
    path = Path(settings.TESTBED_DIR) / "sites.json"
    if not path.exists():
        return None
    return sites_import(document=sites_document_load(text=path.read_text()))


def demo_plan(*, now: datetime, steady_load: bool = True) -> dict[str, Any]:
    """A two-week challenge starting on this week's Monday (UTC), on the testbed's sites. Every activity it invites
    you to run (the README: press Run beside any of them) is open today, whatever weekday it is; with steady_load, a
    load the clock keeps running from now on (left out where nothing should run by itself: the fault suite)."""
    monday = (now - timedelta(days=now.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)

    def at(days: float) -> str:
        return (monday + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")

    return {
        "name": "Demo challenge on the local testbed",
        "slug": "demo",
        "start": at(0),
        "end": at(14),
        "description": "Made by manage.py load_demo: T0 export, tape writes while data is taken (DT), "
        "tape recalls of what they wrote (A-DT: run a DT first), an iperf3 baseline, and a steady load from the "
        "throttled origin that the clock keeps running. On purpose: the ATLAS and CMS tape writes overlap and "
        "oversubscribe TB-TAPE's drives on the days they share (the load planner shows how that reads).",
        # The steady load's rate on a laptop depends on what else the machine does (2.5-4 MB/s seen from the 4 MB/s
        # origin): a target is "at risk" from half its rate on, so that its origin target reads at risk, as it is,
        # rather than flip between at risk and will miss with the machine's load.
        "alerts": {"at_risk_fraction": 0.5},
        "activities": [
            *_demo_activities(at, today=now.weekday()),
            *([_steady_load(now)] if steady_load else []),
        ],
    }


def _steady_load(now: datetime) -> dict[str, Any]:
    """A load the clock keeps flowing from the load of the demo on (auto_run_repeat): native copies from the throttled
    origin, which serves at most its origin_rate (4 MB/s) whatever is asked. Its two targets tell true stories: the
    link's half of that rate is on track; the origin's 110 % of it can at best come close, so it reads at risk (the
    plan counts from half a target as at risk)."""
    start = now.replace(second=0, microsecond=0)
    origin_rate = TestbedConfig.origin_rate
    return {
        "name": "ATLAS steady load",
        "experiment": "ATLAS",
        "mode": "steady",
        "kind": "transfer",
        "start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "end": (start + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": "TB-ORIGIN",
        # 50 x 40 MB, 2 at a time: about 500 s a run at 4 MB/s, 2 GB on TB-T1-A until the run's copies are deleted.
        "file_size": 40_000_000,
        "file_count": 50,
        "concurrency": 2,
        # Through the worker: the origin speaks root:// only, and an XRootD third-party copy from it outlives the
        # origin's TPC authorization when the throttle holds the destination back ("tpc authorization expired").
        "copy_mode": "streamed",
        "ddm_activities": ["Demo Load"],
        "auto_run": True,
        "auto_run_repeat": True,
        "targets": [
            {"link": {"from": "TB-ORIGIN", "to": "TB-T1-A"}, "rate": 0.5 * origin_rate},
            {"site": "TB-ORIGIN", "direction": "out", "rate": 1.1 * origin_rate},
        ],
    }


def _demo_activities(at: Callable[[float], str], *, today: int) -> list[dict[str, Any]]:
    """The demo's activities, their windows in days from the challenge's Monday around `today` (its weekday)."""
    yesterday = max(today - 1, 0)  # on a Monday the export starts with the challenge, not the day before
    return [
        _t0_export(at, yesterday=yesterday, today=today),
        *_tape_activities(at, today=today),
        _baseline(at, yesterday=yesterday, today=today),
    ]


def _t0_export(at: Callable[[float], str], *, yesterday: int, today: int) -> dict[str, Any]:
    """Will miss while nobody runs it: one press of Run moves 2 GB, far from 0.2 GB/s over days."""
    return {
        "name": "ATLAS T0 export",
        "experiment": "ATLAS",
        "mode": "T0",
        "kind": "transfer",
        "start": at(yesterday),
        "end": at(today + 3),
        "source": "TB-T0",
        "file_size": 100_000_000,
        "file_count": 20,
        "concurrency": 10,
        "copy_mode": "pull",
        # Each ATLAS activity names its Rucio activity, so that no two can claim one ingested transfer.
        "ddm_activities": ["T0 Export"],
        "targets": [
            {"link": {"from": "TB-T0", "to": "TB-T1-A"}, "rate": 0.2e9},
            {"site": "TB-T1-B", "direction": "in", "rate": 0.1e9},
        ],
    }


def _tape_activities(at: Callable[[float], str], *, today: int) -> list[dict[str, Any]]:
    """The tape writes (DT) of both experiments, overlapping on purpose, and the CMS recall (A-DT) of their files."""
    return [
        {
            "name": "ATLAS DT",
            "experiment": "ATLAS",
            "mode": "DT",
            "kind": "tape-write",
            "start": at(today),
            "end": at(today + 2),
            "source": "TB-T0",
            "file_size": 10_000_000,
            "file_count": 10,
            "concurrency": 5,
            "ddm_activities": ["T0 Tape"],
            "targets": [{"site": "TB-TAPE", "direction": "in", "rate": 0.2e9}],
        },
        {
            "name": "CMS DT",
            "experiment": "CMS",
            "mode": "DT",
            "kind": "tape-write",
            # with ATLAS DT, today and tomorrow: the tape site oversubscribed on purpose
            "start": at(today),
            "end": at(today + 3),
            "source": "TB-T0",
            "file_size": 10_000_000,
            "file_count": 10,
            "concurrency": 5,
            "ddm_activities": ["T0 Tape"],  # Rucio's tape writes: never the recalls ("Staging") out of the same site
            "targets": [{"site": "TB-TAPE", "direction": "in", "rate": 0.3e9}],
        },
        {
            "name": "CMS A-DT",
            "experiment": "CMS",
            "mode": "A-DT",
            "kind": "staging",
            "start": at(today),
            "end": at(today + 4),
            "file_count": 10,
            "file_size": 10_000_000,
            "ddm_activities": ["Staging"],
            "targets": [
                {
                    "site": "TB-TAPE",
                    "direction": "out",
                    "rate": 0.3e9,
                    "nominal_rate": 0.1e9,
                    "factors": {"headroom": 1.5, "efficiency": 2},
                }
            ],
        },
    ]


def demo_challenge_load(*, steady_load: bool = True) -> PlanImportSummary:
    """Create or refresh the demo challenge (needs the testbed's sites in the registry)."""
    return plan_import(document=demo_plan(now=timezone.now(), steady_load=steady_load))


DEMO_SWEEP = "Demo: the testbed's links as the JUNO tables"


def demo_sweep_ensure(username: str) -> tuple[Any, bool]:
    """The demo sweep (three testbed sites x pull and push x 2 files of 8 MB, iperf3 and path MTU per link),
    started once: (the sweep, whether it was started now). Its copies are deleted step by step."""
    from sweeps.models import Sweep
    from sweeps.services import sweep_start

    existing = Sweep.objects.filter(name=DEMO_SWEEP).first()
    if existing is not None:
        return existing, False
    data = {
        "name": DEMO_SWEEP,
        "sites": ["TB-T0", "TB-T1-A", "TB-WEBDAV"],
        "modes": ["pull", "push"],
        "concurrency": [2],
        "file_size": 8 * 10**6,
        "checksum": "none",  # the plain WebDAV site computes no checksum
        "network_duration": 2,
    }
    return sweep_start(user=get_user_model().objects.get(username=username), data=data), True


def _baseline(at: Callable[[float], str], *, yesterday: int, today: int) -> dict[str, Any]:
    """Measured by its iperf3 runs, not by volume: "not measured" until a run, met by the first."""
    return {
        "name": "iperf3 baseline",
        "experiment": "CMS",
        "mode": "network",
        "kind": "network",
        "start": at(yesterday),
        "end": at(today + 3),
        # 1 Gb/s: a baseline the testbed's loopback passes many times over, even on a loaded machine.
        "targets": [{"site": "TB-T0", "direction": "in", "rate": 1.25e8}],
    }
