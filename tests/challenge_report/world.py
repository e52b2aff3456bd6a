"""The world of the report's tests: a finished two-day challenge in March 2022 with two experiments (ATLAS, CMS),
four sites (CERN, CNAF, PIC and the tape site TAPE-T1), ATLAS's transfers into CNAF and over CERN -> PIC, CMS's
into PIC, ATLAS's tape writes into TAPE-T1 (a tape-write run), failures in FTS's scheme, FTS optimizer decisions,
submitted site reports (CNAF: an outage, a problem with a GGUS ticket, an action), a sweep CERN <-> CNAF (a
transfer step and an iperf3 step) and alerts (one acknowledged and resolved)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model

from challenges.models import Activity, Challenge, Target
from live.models import Alert
from reports.models import (
    ExperimentAction,
    ExperimentProblem,
    ExperimentReport,
    Outage,
    Problem,
    SiteAction,
    SiteReport,
)
from results.models import OptimizerDecision, TransferRecord
from results.services import records_store
from runs.models import Run, RunFile
from sites.models import Capacity, Experiment, Site, StorageEndpoint
from sites.roles import membership_grant
from sweeps.models import Sweep, SweepStep

T0 = datetime(2022, 3, 14, tzinfo=UTC)
GB = 1e9
_ids = itertools.count()


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@dataclass
class World:
    challenge: Challenge
    atlas: Experiment
    cms: Experiment
    sites: dict[str, Site]
    activities: dict[str, Activity]


def record(experiment: Experiment, source: Site, destination: Site, *, start: float, end: float, size: float,
           state: str = "ok", **extra: object) -> TransferRecord:  # fmt: skip
    return TransferRecord(
        experiment=experiment, source_site=source, destination_site=destination, bytes=int(size), start=at(start),
        end=at(end), state=state, mode="pull", origin_id=f"report{next(_ids)}", **({"origin": "fts"} | extra),
    )  # fmt: skip


def _sites() -> dict[str, Site]:
    sites = {}
    for name, tier, country in (("CERN", 0, "CH"), ("CNAF", 1, "IT"), ("PIC", 1, "ES"), ("TAPE-T1", 1, "DE")):
        site = Site.objects.create(name=name, tier=tier, country=country)
        endpoint = StorageEndpoint(site=site, kind="tape" if name == "TAPE-T1" else "disk")
        endpoint.set_url(f"davs://{name.lower()}.example.org:443/data")
        endpoint.save()
        sites[name] = site
    Capacity.objects.create(site=sites["TAPE-T1"], tape_drives=4, tape_drive_rate=300e6)
    return sites


def _plan(challenge: Challenge, atlas: Experiment, cms: Experiment, sites: dict[str, Site]) -> dict[str, Activity]:
    def activity(name: str, experiment: Experiment, kind: str, start: float, end: float) -> Activity:
        return Activity.objects.create(challenge=challenge, name=name, experiment=experiment, mode="DT", kind=kind,
                                       start=at(start), end=at(end), source=sites["CERN"])  # fmt: skip

    made = {
        "atlas-dt": activity("atlas-dt", atlas, "transfer", 0, 600),
        "atlas-tape": activity("atlas-tape", atlas, "tape-write", 0, 120),
        "cms-dt": activity("cms-dt", cms, "transfer", 0, 360),
    }
    Target.objects.create(activity=made["atlas-dt"], site=sites["CNAF"], direction="in", rate=1 * GB)
    Target.objects.create(activity=made["atlas-dt"], link_from=sites["CERN"], link_to=sites["PIC"], rate=2 * GB)
    Target.objects.create(activity=made["atlas-tape"], site=sites["TAPE-T1"], direction="in", rate=0.5 * GB)
    Target.objects.create(activity=made["cms-dt"], site=sites["PIC"], direction="in", rate=0.5 * GB)
    return made


def _records(world: World) -> None:
    s, atlas, cms = world.sites, world.atlas, world.cms
    dt, tape, cms_dt = world.activities["atlas-dt"], world.activities["atlas-tape"], world.activities["cms-dt"]
    records = [record(atlas, s["CERN"], s["CNAF"], start=60 * h, end=60 * h + 60, size=3600 * 1.5 * GB)
               for h in range(10)]  # fmt: skip
    records += [record(atlas, s["CERN"], s["PIC"], start=60 * h, end=60 * h + 60, size=3600 * 1 * GB)
                for h in range(10)]  # fmt: skip
    records += [record(cms, s["CERN"], s["PIC"], start=60 * h, end=60 * h + 60, size=3600 * 0.3 * GB)
                for h in range(6)]  # fmt: skip
    scheme = {"fts_error_category": "TRANSFER", "error_scope": "DESTINATION", "failure_phase": "TRANSFER"}
    records += [record(atlas, s["CERN"], s["CNAF"], start=30 + n, end=31 + n, size=GB, state="failed",
                       error_message="Connection timed out to https://cnaf.example.org/x", **scheme)
                for n in range(3)]  # fmt: skip
    write = Run.objects.create(activity=tape, kind="tape-write", state="finished", started_at=at(0))
    records += [record(atlas, s["CERN"], s["TAPE-T1"], start=30 * n, end=30 * n + 30, size=1800 * 0.6 * GB,
                       run=write, activity=tape, origin="probe")
                for n in range(4)]  # fmt: skip
    records_store(records=records)
    assert dt and cms_dt


def _reports(world: World) -> None:
    s = world.sites
    cnaf = SiteReport.objects.create(challenge=world.challenge, site=s["CNAF"], status="submitted",
                                     notes="CNAF held **1.5 GB/s** for ten hours.")  # fmt: skip
    Outage.objects.create(report=cnaf, start=at(120), end=at(150), reason="StoRM frontend restarted")
    Problem.objects.create(report=cnaf, category="storage", ticket="GGUS 156789",
                           description="Timeouts on the StoRM WebDAV doors")  # fmt: skip
    SiteAction.objects.create(report=cnaf, description="Raised the WebDAV thread pool to 400", taken_at=at(160))
    SiteReport.objects.create(challenge=world.challenge, site=s["PIC"], status="accepted", notes="All fine.")
    SiteReport.objects.create(challenge=world.challenge, site=s["CERN"], status="draft", notes="DRAFT-NOT-SHOWN")
    atlas = ExperimentReport.objects.create(
        challenge=world.challenge, experiment=world.atlas, status="submitted",
        narrative="ATLAS exported at **1.5 GB/s** to CNAF; PIC fell short.",
        lessons="Ask sites for their WebDAV limits early\nTape writes need a bigger buffer",
        next_steps="- Repeat the PIC link with 200 files in flight",
    )  # fmt: skip
    ExperimentProblem.objects.create(report=atlas, category="network", ticket="GGUS 157000",
                                     description="PIC link capped at 1 GB/s")  # fmt: skip
    ExperimentAction.objects.create(report=atlas, description="Doubled FTS actives on CERN -> PIC", taken_at=at(200))
    ExperimentReport.objects.create(challenge=world.challenge, experiment=world.cms, narrative="CMS-DRAFT-NOT-SHOWN")


def _sweep(world: World) -> None:
    s = world.sites
    sweep = Sweep.objects.create(name="JUNO-like sweep", activity=world.activities["atlas-dt"], state="finished",
                                 started_at=at(400), finished_at=at(430))  # fmt: skip
    run = Run.objects.create(kind="transfer", state="finished", started_at=at(400))
    for index in range(4):
        RunFile.objects.create(run=run, index=index, source_url="davs://cern/x", destination_url="davs://cnaf/y",
                               size=GB, state="done")  # fmt: skip
    records_store(records=[record(world.atlas, s["CERN"], s["CNAF"], start=400, end=401, size=GB, run=run,
                                  origin="probe") for _ in range(4)])  # fmt: skip
    SweepStep.objects.create(sweep=sweep, index=0, kind="transfer", source=s["CERN"], destination=s["CNAF"],
                             mode="pull", concurrency=4, run=run, state="ended")  # fmt: skip
    iperf = Run.objects.create(kind="network", state="finished", summary={"ok": True, "rate": 1.1e9, "path_mtu": 1500,
                                                                          "local_mtu": 9000})  # fmt: skip
    SweepStep.objects.create(sweep=sweep, index=1, kind="network", source=s["CNAF"], destination=s["CERN"],
                             run=iperf, state="ended")  # fmt: skip


def _alerts_and_decisions(world: World) -> None:
    s = world.sites
    coordinator = get_user_model().objects.create_user("shifter")
    Alert.objects.create(
        challenge=world.challenge, kind="throughput_drop", subject=f"link:{s['CERN'].pk}-{s['CNAF'].pk}",
        state="resolved", experiment=world.atlas, link_source=s["CERN"], link_destination=s["CNAF"],
        message="CERN -> CNAF fell to 20% of its hour", started_at=at(125), last_seen_at=at(140),
        resolved_at=at(155), acknowledged_by=coordinator, acknowledged_at=at(130),
    )  # fmt: skip
    for minutes, active, rationale in ((60, 60, ""), (300, 30, "Destination throughput limitation reached")):
        OptimizerDecision.objects.create(
            source_site=s["CERN"], destination_site=s["PIC"], source_se="davs://cern.example.org",
            dest_se="davs://pic.example.org", at=at(minutes), active=active, actual_active=active, queue_size=500,
            throughput=1e9, success=99.0, rationale=rationale,
        )  # fmt: skip


def world_make() -> World:
    atlas, cms = Experiment.objects.create(name="ATLAS"), Experiment.objects.create(name="CMS")
    sites = _sites()
    for site in sites.values():
        site.experiments.set([atlas, cms])
    challenge = Challenge.objects.create(name="Data Challenge '22", slug="dc22", start=T0, end=T0 + timedelta(days=2),
                                         description="Show **T0 export** at the rates of Run 3.")  # fmt: skip
    world = World(challenge, atlas, cms, sites, _plan(challenge, atlas, cms, sites))
    _records(world)
    _reports(world)
    _sweep(world)
    _alerts_and_decisions(world)
    return world


def user_with(role: str, **scope: object) -> object:
    user = get_user_model().objects.create_user(f"{role}-{next(_ids)}")
    if role != "none":
        membership_grant(user=user, role=role, **scope)  # type: ignore[arg-type]
    return user
