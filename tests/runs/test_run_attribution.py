"""A portal run's records count for its activity, never for another activity at the same site and time; an ad hoc
run's count for none (results.store.attribution, rule 1)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from challenges.models import Activity, Challenge, Target
from measure.outcomes import FileOutcome
from results.models import TransferRecord
from results.targets.rates import target_rates
from runs.models import Run
from runs.probes.runs import run_probe_store
from tests.sites.factories import ExperimentFactory, SiteFactory, StorageEndpointFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 5, 5, tzinfo=UTC)
MB = 10**6


def test_a_runs_records_count_for_its_activity_only() -> None:
    atlas = ExperimentFactory(name="ATLAS")
    source, destination = SiteFactory(name="TB-T0"), SiteFactory(name="TB-T1-A")
    StorageEndpointFactory(site=source, url="root://t0.example.org:1094//data")
    StorageEndpointFactory(site=destination, url="root://t1a.example.org:1094//data")
    challenge = Challenge.objects.create(name="C", slug="c", start=T0, end=T0 + timedelta(days=1))
    targets = {}
    for name in ("ATLAS export", "ATLAS functional"):
        activity = Activity.objects.create(
            challenge=challenge,
            name=name,
            experiment=atlas,
            mode="DT",
            kind="transfer",
            start=T0,
            end=T0 + timedelta(hours=1),
        )
        targets[name] = Target.objects.create(activity=activity, site=destination, direction="in", rate=MB)
    export = targets["ATLAS export"].activity
    outcomes = [
        FileOutcome(
            source_url=f"root://t0.example.org:1094//data/f{n}",
            destination_url=f"root://t1a.example.org:1094//data/f{n}",
            bytes=16 * MB,
            start=T0 + timedelta(minutes=n),
            end=T0 + timedelta(minutes=n, seconds=30),
            ok=True,
            mode="native",
        )
        for n in range(20)
    ]
    run = Run.objects.create(activity=export, kind="transfer")
    ad_hoc = Run.objects.create(kind="transfer", parameters={"experiment": "ATLAS"})
    run_probe_store(run.pk, outcomes, {})
    run_probe_store(ad_hoc.pk, outcomes, {})

    def volume(name: str) -> float:
        return target_rates(target=targets[name], max_window=60, stable_window=60).volume

    assert (volume("ATLAS export"), volume("ATLAS functional")) == (320 * MB, 0)
    assert set(TransferRecord.objects.filter(run=ad_hoc).values_list("activity_id", flat=True)) == {None}
    assert set(TransferRecord.objects.filter(run=run).values_list("activity_id", flat=True)) == {export.pk}
