"""Redis and PostgreSQL servers of a test's own, to break for real: shut down without saving, restarted, killed.
Never the machine's shared ones. Each lives in a directory of its own and on a free loopback port."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import redis

from common import processes
from portal.devstack import _pg_bin


class RedisServer:
    """redis-server on 127.0.0.1:PORT; `persist` keeps its data in an append-only file across restarts."""

    def __init__(self, directory: Path, *, persist: bool = False, port: int = 46379) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = processes.free_port(port)
        self.persist = persist
        self.pidfile = self.dir / "redis.pid"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)]
        argv += ["--save", "", "--appendonly", "yes" if self.persist else "no"]
        processes.start(argv, pidfile=self.pidfile, logfile=self.dir / "redis.log", cwd=self.dir)
        if not processes.wait_for_port(self.port, timeout=10):
            raise RuntimeError(f"redis-server did not start: {(self.dir / 'redis.log').read_text()[-2000:]}")

    def shutdown_nosave(self) -> None:
        """Gone with everything it held (SHUTDOWN NOSAVE), as a crash of a Redis without persistence."""
        with contextlib.suppress(redis.ConnectionError):  # it answers the shutdown by closing the connection
            redis.Redis.from_url(self.url).shutdown(nosave=True)
        deadline = time.monotonic() + 10
        while processes.read_pid(self.pidfile) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        processes.stop(self.pidfile, timeout=2)

    def stop(self) -> None:
        processes.stop(self.pidfile, timeout=5)


class PostgresServer:
    """A PostgreSQL cluster of its own (initdb once), trust auth on 127.0.0.1:PORT, restartable."""

    user = "postgres"

    def __init__(self, *, port: int = 45432) -> None:
        # Somewhere the server's user can reach (a test's tmp_path below /tmp/pytest-of-root is closed to it).
        self.dir = Path(tempfile.mkdtemp(prefix="portal-faults-pg-", dir="/var/tmp"))
        self.dir.chmod(0o755)
        self.data = self.dir / "data"
        self.port = processes.free_port(port)

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, argv: list[str]) -> None:
        owner = self.user if processes.is_root() else ""
        runner = processes.as_user(argv, owner) if owner else argv
        result = subprocess.run(runner, cwd="/", capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed:\n{result.stdout}{result.stderr}")

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self.data.mkdir()
            if processes.is_root():
                processes.chown_tree(self.dir, self.user)
            self._run([_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        options = f"-p {self.port} -h 127.0.0.1 -k '' -c fsync=off -c full_page_writes=off"
        self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"), "-o", options, "-w", "start"])

    def stop(self, mode: str = "fast") -> None:
        """mode "fast" ends every session cleanly; "immediate" is a crash (recovery at the next start)."""
        self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def execute(self, sql: str, database: str = "postgres") -> list[tuple[object, ...]]:
        with psycopg.connect(self.url(database).replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
            cursor = conn.execute(sql)
            return list(cursor.fetchall()) if cursor.description else []

    def remove(self) -> None:
        with contextlib.suppress(RuntimeError):  # already stopped
            self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
