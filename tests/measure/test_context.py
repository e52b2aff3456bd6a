"""gfal2 contexts leave the caller's signal mask alone (gfal2's own creat_context blocks SIGTERM for good)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import gfal2
import pytest

from measure.context import gfal2_context_new

SCRIPT = """
import json
import signal
from measure.context import gfal2_context_new

before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
gfal2_context_new()
after = signal.pthread_sigmask(signal.SIG_BLOCK, [])
print(json.dumps([sorted(int(s) for s in before), sorted(int(s) for s in after)]))
"""


def test_making_a_context_leaves_sigterm_deliverable_to_the_caller_and_its_children() -> None:
    # A fresh interpreter: this test process has made contexts already.
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True, timeout=60)
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert after == before
    assert int(signal.SIGTERM) not in after


def test_an_endpoint_that_refuses_connections_fails_in_seconds_with_its_error() -> None:
    ctx = gfal2_context_new()
    started = time.monotonic()
    with pytest.raises(gfal2.GError, match="Connection refused"):
        ctx.stat("root://127.0.0.1:1//data/nothing")  # port 1: nothing listens
    assert time.monotonic() - started < 30  # XRootD's defaults retried for minutes
