"""What lets the suite run on several pytest-xdist workers (`pytest -n 2 --dist loadgroup`, bin/portal test's main
lane). Loaded by pyproject's addopts (`-p tests.parallel`) so that it acts before Django reads its settings.

- Each worker gets a Redis db of its own (gwN: the db of REDIS_URL + N), as it gets a test database of its own from
  pytest-django (test_NAME_gwN): a worker's queued tasks, cache keys and `cache.clear()` never meet another's.
- The tests that share one thing of the machine run in one worker, one after the other, in xdist group "testbed":
  the testbed (one set of servers, its disk and tape), and the Redis servers of tests/runs started on a preferred
  port (46379: found free, then bound, so two workers could pick the same one and each take the other's server for
  its own; test_reliability is a testbed test). Every other test is in group "others", run by the other worker:
  two groups for two workers, each run in the order pytest-django gives (database tests before transactional ones,
  whose flush empties the tables that migrations fill), which xdist's scheduler keeps only within a group.
- Every test has a node id of its own (xdist's scheduler keys tests by node id).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator

import pytest

# xdist group -> the fixtures (used directly or through another fixture) and markers that put a test in it; the first
# that matches wins.
GROUPS = {
    "testbed": ({"testbed", "own_redis", "own_broker"}, {"testbed", "faults"}),
}
OTHERS = "others"


def redis_url_for_worker(url: str, worker: str) -> str:
    """REDIS_URL with its db moved up by the worker's number (gw0 keeps it)."""
    number = int(worker.removeprefix("gw"))
    match = re.fullmatch(r"(rediss?://[^/]+)(?:/(\d*))?", url)
    if not match:
        raise pytest.UsageError(f"REDIS_URL {url!r}: expected redis://HOST:PORT/DB to give each xdist worker a db")
    db = int(match.group(2) or 0) + number
    if db > 15:
        raise pytest.UsageError(f"REDIS_URL {url!r}: xdist worker {worker} would need Redis db {db} (0-15)")
    return f"{match.group(1)}/{db}"


def _worker_environment() -> None:
    """In an xdist worker: REDIS_URL (and the Celery URLs that follow it) on the worker's own db, for this process
    and the workers and commands its tests start."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    ours = redis_url_for_worker(base, worker)
    for key in ("REDIS_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"):
        if os.environ.get(key, base) == base:
            os.environ[key] = ours


_worker_environment()  # at import: before pytest-django has Django read the settings


def group_of(item: pytest.Item) -> str:
    """The xdist group a test runs in."""
    fixtures = set(getattr(item, "fixturenames", ()))
    for group, (names, markers) in GROUPS.items():
        if fixtures & names or any(item.get_closest_marker(marker) for marker in markers):
            return group
    return OTHERS


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    """Node ids of their own for every test; under `--dist loadgroup` (in xdist's workers), the tests of each group
    marked before xdist's own hook reads the marks, and checked after it."""
    _unique_node_ids(items)
    if not getattr(config.option, "loadgroup", False):
        return (yield)
    groups = {item: group_of(item) for item in items}
    for item, group in groups.items():
        item.add_marker(pytest.mark.xdist_group(group))
    result = yield
    _group_in_node_ids(groups)
    repeated = [nodeid for nodeid, count in Counter(item.nodeid for item in items).items() if count > 1]
    if repeated:  # xdist's scheduler keys tests by node id: all but one of them would silently not run
        raise pytest.UsageError(f"{len(repeated)} node ids name more than one test, e.g. {repeated[0]}")
    return result


def _unique_node_ids(items: list[pytest.Item]) -> None:
    """schemathesis's tests (one per API operation, named `test_x[GET /api/v1/...]`) all get the function's node id
    under pytest 9.2, which keeps ids apart from names: give them their names back, as pytest 8 did."""
    counts = Counter(item.nodeid for item in items)
    for item in items:
        if counts[item.nodeid] > 1 and item.parent is not None and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId  # pytest >= 9.2

            item._id = NodeId.parse(f"{item.parent.nodeid}::{item.name}")


def _group_in_node_ids(groups: dict[pytest.Item, str]) -> None:
    """The group as xdist's scheduler reads it: a suffix of the node id. pytest-xdist 3.8 writes it into
    `Item._nodeid`, which pytest 9.2's structured node ids no longer read, and the group is then silently lost
    (pytest-xdist issue #1386): write it where pytest 9.2 keeps the id, and refuse to run when it did not hold."""
    for item, group in groups.items():
        if not item.nodeid.endswith(f"@{group}") and hasattr(item, "_id"):
            from _pytest.nodeid import NodeId  # pytest >= 9.2

            item._id = NodeId.parse(f"{item.nodeid}@{group}")
    lost = [item.nodeid for item, group in groups.items() if not item.nodeid.endswith(f"@{group}")]
    if lost:
        raise pytest.UsageError(f"xdist's loadgroup did not keep {len(lost)} tests in their group, e.g. {lost[0]}")
