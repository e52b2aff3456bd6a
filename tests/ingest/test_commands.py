"""manage.py ingest: replaying a dump (NDJSON, gzip too)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.core.management import CommandError, call_command

from results.models import TransferRecord

from .samples import RUCIO_TRANSFER_DONE, fts_variant

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
