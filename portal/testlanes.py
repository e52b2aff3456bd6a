"""`bin/portal test`'s parts: the pytest processes it runs at the same time (lanes), the handbook built after them,
and the summary it ends with. Plain Python, like devstack.py, which runs them.

With no arguments the suite runs in two lanes, since most of its time is spent waiting (on copies, on servers
starting and stopping, on a beat that is away), not computing: the main suite on TEST_WORKERS xdist workers, and the
fault suite (tests/faults) beside it, which shares nothing with the main suite: its own PostgreSQL and Redis servers,
deployments and testbed (directory and ports), and it never opens the main suite's test databases.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
PYTHON = sys.executable
# The main lane's xdist workers: one takes the tests that share the testbed, in order, the other one everything else
# (tests/parallel.py's two groups); more would not shorten the testbed's share, the longest.
TEST_WORKERS = 2
FAULTS_PORT_OFFSET = 500  # the fault suite's own testbed: TESTBED_BASE_PORT + this


@dataclass
class Lane:
    """One pytest process of `bin/portal test`; its output goes to the terminal, or to `log` (shown at the end)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    log: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None

    def start(self) -> None:
        output = self.log.open("wb") if self.log else None
        self.started = time.monotonic()
        try:
            self.process = subprocess.Popen(
                [PYTHON, "-m", "pytest", *self.argv],
                cwd=ROOT,
                env={**os.environ, **self.env},
                stdout=output,
                stderr=subprocess.STDOUT if output else None,
            )
        finally:
            if output:
                output.close()

    def poll(self) -> bool:
        """True once the lane has ended (its code and time then kept)."""
        assert self.process is not None
        if self.returncode is None and self.process.poll() is not None:
            self.returncode = self.process.returncode
            self.seconds = time.monotonic() - self.started
        return self.returncode is not None

    def outcome(self) -> str:
        if self.returncode == 0:
            return "passed"
        if self.returncode == 5:
            return "no tests collected (exit 5: a failure for this project)"
        return f"FAILED (exit {self.returncode})"

    def last_lines(self) -> list[str]:
        """The lines of its log that sum it up: pytest's last line, and the fault suite's tally."""
        if not self.log or not self.log.exists():
            return []
        lines = [line.strip("= ") for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        tally = [line for line in lines if line.startswith("fault suite:")]
        return tally + lines[-1:]


def test_lanes(pytest_args: list[str]) -> list[Lane]:
    """With arguments: exactly `pytest ARGS`, one process. Without: the main suite on TEST_WORKERS xdist workers and,
    beside it, the fault suite (tests/faults) on a testbed of its own, its output in var/log/test-faults.log. The
    fault suite shares nothing with the main suite: its own PostgreSQL, Redis servers, deployments and testbed
    (directory and ports); it never opens the main suite's test databases."""
    if pytest_args:
        return [Lane("pytest", pytest_args)]
    base_port = int(os.environ.get("TESTBED_BASE_PORT", "21000"))
    testbed_dir = os.environ.get("TESTBED_DIR", str(VAR / "testbed"))
    (VAR / "log").mkdir(parents=True, exist_ok=True)
    return [
        Lane("tests", ["-m", "not faults", "-n", str(TEST_WORKERS), "--dist", "loadgroup"]),
        Lane(
            "faults",
            ["-m", "faults", "-p", "no:cacheprovider", "--durations=0", "tests/faults"],
            env={"TESTBED_DIR": f"{testbed_dir}-faults", "TESTBED_BASE_PORT": str(base_port + FAULTS_PORT_OFFSET)},
            log=VAR / "log" / "test-faults.log",
        ),
    ]


def docs_build() -> Lane | None:
    """The handbook built strictly (a broken link or a page missing from the nav fails), once mkdocs.yml exists."""
    if not (ROOT / "mkdocs.yml").exists():
        return None
    lane = Lane("docs", [])
    lane.started = time.monotonic()
    argv = [PYTHON, "-m", "mkdocs", "build", "--strict", "--site-dir", str(VAR / "site")]
    lane.returncode = subprocess.run(argv, cwd=ROOT).returncode
    lane.seconds = time.monotonic() - lane.started
    return lane


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def lanes_wait(lanes: list[Lane], log: Callable[[str], None]) -> None:
    """Until every lane has ended; Ctrl-C reaches the pytest processes too, and they run their teardown (which
    stops the testbeds they started) before they end."""
    announced = False
    while True:
        try:
            if all([lane.poll() for lane in lanes]):
                return
            if len(lanes) > 1 and lanes[0].poll() and not announced:
                log(f"{lanes[0].name} done: waiting for {', '.join(lane.name for lane in lanes if not lane.poll())}")
                announced = True
            time.sleep(1)
        except KeyboardInterrupt:
            log("Ctrl-C: waiting for pytest to clean up")


def logs_show(lanes: list[Lane]) -> None:
    """The output of the lanes that wrote to a log, after the terminal's lane."""
    for lane in lanes:
        if lane.log and lane.log.exists():
            print(f"\n{'=' * 24} {lane.name} ({lane.log.relative_to(ROOT)}) {'=' * 24}", flush=True)
            print(lane.log.read_text(errors="replace"), end="", flush=True)


def summary(lanes: list[Lane], docs: Lane | None, seconds: float) -> list[str]:
    """Each part's outcome, time and command, with the lines that sum up a lane shown from its log."""
    lines = [f"summary, {_minutes(seconds)} in all:"]
    for lane in [*lanes, *([docs] if docs else [])]:
        what = "mkdocs build --strict --site-dir var/site" if lane is docs else f"pytest {' '.join(lane.argv)}"
        lines.append(f"  {lane.name:<7} {lane.outcome():<7} {_minutes(lane.seconds)}  {what}")
        lines += [f"  {'':<7} {line}" for line in lane.last_lines()]
    if docs is None:
        passed = all(lane.returncode == 0 for lane in lanes)
        lines.append(f"  {'docs':<7} {'skipped: no mkdocs.yml' if passed else 'not built: the tests failed'}")
    return lines
