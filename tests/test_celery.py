"""A task's round trip through the real Redis broker and a real worker process."""

from __future__ import annotations

import uuid

from portal.tasks import ping


def test_a_task_round_trips_through_redis_and_a_real_worker(celery_worker_process: str) -> None:
    payload = uuid.uuid4().hex
    result = ping.apply_async(args=[payload], queue=celery_worker_process)
    answer = result.get(timeout=60)
    assert answer["payload"] == payload
    assert answer["worker"]
