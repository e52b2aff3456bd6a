"""manage.py ingest: replaying a dump (NDJSON, gzip too)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import CommandError, call_command

from challenges.models import Activity, Target
from results.models import TransferRecord
from results.targets.rates import target_rates

from .helpers import uam_target
from .samples import FTS_COMPLETE, RUCIO_TRANSFER_DONE, fts_variant

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest", *args, "--no-progress", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_gzipped_dump_is_replayed_in_batches_and_a_second_replay_stores_nothing(
    world: dict[str, Any], tmp_path: Path
) -> None:
    lines = [orjson.dumps(fts_variant(i)) for i in range(25)]
    lines.insert(7, b"{not json")
    dump = tmp_path / "fts.ndjson.gz"
    dump.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    out, err = run("--format", "fts", "--batch", "10", str(dump))
    assert out.strip() == "accepted 25, duplicates 0, skipped 0, rejected 1"
    assert err.startswith("line 8 (non-blank): not JSON")
    assert TransferRecord.objects.count() == 25
    out, _err = run("--format", "fts", "--batch", "10", str(dump))
    assert out.strip() == "accepted 0, duplicates 25, skipped 0, rejected 1"


def test_a_single_vo_rucio_dump_takes_the_experiment_given(world: dict[str, Any], tmp_path: Path) -> None:
    dump = tmp_path / "rucio.ndjson"
    dump.write_bytes(orjson.dumps(RUCIO_TRANSFER_DONE) + b"\n")
    out, _err = run("--format", "rucio", "--experiment", "dune", str(dump))
    assert out.strip() == "accepted 1, duplicates 0, skipped 0, rejected 0"
    assert TransferRecord.objects.get().experiment == world["dune"]
    with pytest.raises(CommandError, match="not an experiment"):
        run("--format", "rucio", "--experiment", "LHCb", str(dump))


def test_a_replay_with_two_activities_of_one_experiment_at_one_site_gives_each_its_own_files(
    world: dict[str, Any], tmp_path: Path
) -> None:
    # Both activities: ATLAS out of CNAF, the same minute; told apart by their DDM activities only.
    consolidation = uam_target(world, direction="out", site="cnaf")
    consolidation.activity.ddm_activities = ["Data Consolidation"]
    consolidation.activity.save()
    export_activity = Activity.objects.create(
        challenge=consolidation.activity.challenge,
        name="atlas-t0-export",
        experiment=world["atlas"],
        mode="T0 export",
        kind="transfer",
        start=consolidation.activity.start,
        end=consolidation.activity.end,
        ddm_activities=["T0 Export"],
    )
    export = Target.objects.create(activity=export_activity, site=world["cnaf"], direction="out", rate=1e6)
    messages = [fts_variant(i) for i in range(12)] + [fts_variant(100 + i, activity="T0 Export") for i in range(8)]
    dump = tmp_path / "fts.ndjson"
    dump.write_bytes(b"\n".join(orjson.dumps(message) for message in messages) + b"\n")
    out, _err = run("--format", "fts", "--batch", "7", str(dump))
    assert out.strip() == "accepted 20, duplicates 0, skipped 0, rejected 0"
    size = int(FTS_COMPLETE["file_size"])
    rates = {
        name: target_rates(target=target, max_window=60, stable_window=60)
        for name, target in (("consolidation", consolidation), ("export", export))
    }
    assert rates["consolidation"].volume == pytest.approx(12 * size)
    assert rates["export"].volume == pytest.approx(8 * size)
    assert (rates["consolidation"].files_ok, rates["export"].files_ok) == (12, 8)
