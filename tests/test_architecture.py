"""The house keeps its floors (ARCHITECTURE.md): import contracts, and rooms of a readable size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600
# Apps and the roof: what must stay small. Migrations are generated; tests and benchmarks are not rooms.
PACKAGES = (
    "portal",
    "testbed",
    "sweeps",
    "live",
    "runs",
    "ingest",
    "results",
    "reports",
    "challenges",
    "sites",
    "common",
)


def test_the_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_no_module_is_longer_than_600_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concern: {long}"
