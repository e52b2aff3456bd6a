"""Real Celery workers for the tests (their own processes): the test database as a worker reads it, and the
command line that starts one."""

from __future__ import annotations

import sys
from urllib.parse import quote

from django.conf import settings
from django.db import connection


def worker_database_url() -> str:
    """The test database as a DATABASE_URL, so that a worker's tasks see what a transactional test committed."""
    db = settings.DATABASES["default"]
    credentials = quote(db["USER"], safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else "")
    database = quote(connection.settings_dict["NAME"], safe="")
    return f"postgres://{credentials}@{db['HOST']}:{db['PORT']}/{database}"


def worker_argv(*, name: str, queues: str, pool: str = "threads", concurrency: int = 8) -> list[str]:
    """`celery -A portal worker` on these queues, named NAME@host, without gossip and mingle (quicker to start)."""
    argv = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool", pool, "--concurrency", str(concurrency)]
    return [*argv, "-Q", queues, "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "info"]
