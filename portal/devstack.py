"""The README's two commands: `bin/portal run` and `bin/portal test` (after bin/portal's setup step).

run:  services (DATABASE_URL / REDIS_URL, or private PostgreSQL and Redis under var/), migrate, the testbed,
      the demo, then gunicorn, a Celery worker and Celery beat in the foreground until Ctrl-C, which stops
      everything this command started.
test: the same services, then the whole pytest suite in lanes at the same time and the handbook (testlanes.py), or
      just `pytest ARGS` when given arguments (the suite starts the testbed itself when it is down).

Plain Python on purpose: it runs before Django is configured, because it decides the database URL.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from common import processes
from portal import testlanes

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var"
RUN = VAR / "run"
PYTHON = sys.executable


def log(message: str) -> None:
    print(f"[portal] {message}", flush=True)


def load_dotenv() -> None:
    """Read .env into the environment (values already set win), as settings.py does."""
    path = ROOT / ".env"
    if not path.exists():
        return
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))


# --- private PostgreSQL --------------------------------------------------------------------------------


def _pg_bin(name: str) -> str:
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    found = candidates[0] if candidates else shutil.which(name)
    if not found:
        raise SystemExit(f"PostgreSQL's {name} not found: install the postgresql package or set DATABASE_URL.")
    return found


class PrivatePostgres:
    """A PostgreSQL cluster in var/postgres, listening on 127.0.0.1 only, trust auth, no Unix socket.

    As root the server runs as the `postgres` user, which must be able to reach var/. When the checkout sits
    below a directory closed to other users (such as /root), the cluster lives in /var/tmp instead, with
    var/postgres pointing at it.
    """

    user = "postgres"

    def __init__(self) -> None:
        self.dir = processes.reachable_directory(VAR / "postgres", self.user)
        self.data = self.dir / "data"
        self.port_file = self.dir / "port"

    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port()}/portal"

    def port(self) -> int:
        return int(self.port_file.read_text())

    def running(self) -> bool:
        return processes.read_pid(self.data / "postmaster.pid") is not None

    def start(self) -> bool:
        """Start the cluster (creating it the first time). False when it was already running."""
        if self.running():
            return False
        self.dir.mkdir(parents=True, exist_ok=True)
        owner = self.user if processes.is_root() else os.environ.get("USER", "")
        if not (self.data / "PG_VERSION").exists():
            log("creating a private PostgreSQL cluster in var/postgres")
            self.data.mkdir(parents=True, exist_ok=True)
            processes.chown_tree(self.dir, owner)
            self._run([_pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
        preferred = int(os.environ.get("PORTAL_PG_PORT", "55432"))
        port = preferred if processes.port_free(preferred) else processes.free_port(preferred + 1)
        self.port_file.write_text(str(port))
        processes.chown_tree(self.dir, owner)
        options = f"-p {port} -h 127.0.0.1 -k '' -c fsync=off -c full_page_writes=off"
        self._run(
            [
                _pg_bin("pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.dir / "postgres.log"),
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ]
        )
        self._create_database()
        return True

    def stop(self) -> None:
        if self.running():
            self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def _run(self, argv: list[str]) -> None:
        runner = processes.as_user(argv, self.user) if processes.is_root() else argv
        result = subprocess.run(runner, cwd="/", capture_output=True, text=True)
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(argv[:2])} failed:\n{result.stdout}{result.stderr}")

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={self.port()} user=postgres dbname=postgres", autocommit=True
        ) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = 'portal'").fetchone()
            if not exists:
                conn.execute("CREATE DATABASE portal")


# --- private Redis -------------------------------------------------------------------------------------


class PrivateRedis:
    """A Redis server in var/redis on 127.0.0.1 that keeps its data in an append-only file: queued tasks outlive a
    restart (the runs' reaper sends again what a Redis without its data lost)."""

    def __init__(self) -> None:
        self.dir = VAR / "redis"
        self.pidfile = self.dir / "redis.pid"
        self.port_file = self.dir / "port"

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port()}/0"

    def port(self) -> int:
        return int(self.port_file.read_text())

    def running(self) -> bool:
        return processes.read_pid(self.pidfile) is not None

    def start(self) -> bool:
        if self.running():
            return False
        self.dir.mkdir(parents=True, exist_ok=True)
        server = shutil.which("redis-server")
        if not server:
            raise SystemExit("redis-server not found: install the redis-server package or set REDIS_URL.")
        preferred = int(os.environ.get("PORTAL_REDIS_PORT", "56379"))
        port = preferred if processes.port_free(preferred) else processes.free_port(preferred + 1)
        self.port_file.write_text(str(port))
        argv = [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--daemonize",
            "no",
        ]
        pid = processes.start(argv, pidfile=self.pidfile, logfile=self.dir / "redis.log")
        if not processes.wait_for_port(port, pid=pid):
            raise SystemExit(f"Redis did not start: see {self.dir / 'redis.log'}")
        return True

    def stop(self) -> None:
        processes.stop(self.pidfile)


# --- the stack -----------------------------------------------------------------------------------------


class Stack:
    """The services a command needs, remembering which ones it started so that it stops only those."""

    def __init__(self) -> None:
        self.cleanups: list[tuple[str, Callable[[], object]]] = []

    def services(self) -> None:
        load_dotenv()
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
        if os.environ.get("DATABASE_URL"):
            log("database: DATABASE_URL from the environment")
        else:
            pg = PrivatePostgres()
            if pg.start():
                self.cleanups.append(("PostgreSQL", pg.stop))
            os.environ["DATABASE_URL"] = pg.url()
            log(f"database: private PostgreSQL on 127.0.0.1:{pg.port()} (var/postgres)")
        if os.environ.get("REDIS_URL"):
            log("redis: REDIS_URL from the environment")
        else:
            redis = PrivateRedis()
            if redis.start():
                self.cleanups.append(("Redis", redis.stop))
            os.environ["REDIS_URL"] = redis.url()
            log(f"redis: private Redis on 127.0.0.1:{redis.port()} (var/redis)")

    def manage(self, *args: str, capture: bool = False) -> str:
        """Run a manage.py command; its output is returned when capture is set, else shown."""
        result = subprocess.run(
            [PYTHON, str(ROOT / "manage.py"), *args], cwd=ROOT, text=True, stdout=subprocess.PIPE if capture else None
        )
        if result.returncode != 0:
            raise SystemExit(f"manage.py {' '.join(args)} failed (exit {result.returncode})")
        return result.stdout or ""

    def manage_ok(self, *args: str) -> bool:
        """Whether a manage.py command succeeds (its output hidden)."""
        result = subprocess.run([PYTHON, str(ROOT / "manage.py"), *args], cwd=ROOT, capture_output=True)
        return result.returncode == 0

    def shutdown(self) -> None:
        for name, cleanup in reversed(self.cleanups):
            log(f"stopping {name}")
            try:
                cleanup()
            except (Exception, SystemExit) as exc:  # keep stopping the rest
                log(f"could not stop {name}: {exc}")
        self.cleanups.clear()


def command_run(args: argparse.Namespace) -> int:
    stack = Stack()
    children: dict[str, subprocess.Popen[bytes]] = {}

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGINT too: a launcher started in the background of a script inherits SIGINT ignored.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, terminate)
    try:
        stack.services()
        stack.manage("migrate", "--noinput", "-v", "0")
        stack.manage("collectstatic", "--noinput", "-v", "0")
        testbed_was_up = stack.manage_ok("testbed", "status")
        stack.manage("testbed", "up")
        if not testbed_was_up:
            stack.cleanups.append(("the testbed", lambda: stack.manage("testbed", "down")))
        # The demo runs on the local testbed: its workers must trust the testbed's CA (davs://) and send its token.
        os.environ.setdefault("PROBES_TESTBED", "true")
        demo = stack.manage("load_demo", capture=True).strip().splitlines()[-1]
        RUN.mkdir(parents=True, exist_ok=True)
        port = int(os.environ.get("PORTAL_PORT", "8000"))
        if not processes.port_free(port):
            port = processes.free_port(port + 1)
        # Alert links and e-mails name the portal by PORTAL_URL: the port chosen here unless the operator set one.
        os.environ.setdefault("PORTAL_URL", f"http://127.0.0.1:{port}")
        commands = _children_commands(port)
        for name, argv in commands.items():
            children[name] = _child_start(name, argv)
        if not processes.wait_for_port(port, pid=children["web"].pid, timeout=30):
            raise SystemExit("the web server did not start")
        log(f"portal ready: http://127.0.0.1:{port}/   {demo}")
        log("testbed endpoints: .venv/bin/python manage.py testbed status   (Ctrl-C stops everything)")
        _children_watch(children, commands)
    except KeyboardInterrupt:
        log("Ctrl-C: stopping")
    finally:
        for name, child in reversed(list(children.items())):
            if child.poll() is None:
                log(f"stopping {name}")
                child.terminate()
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
        stack.shutdown()
    return 0


def _children_commands(port: int) -> dict[str, list[str]]:
    """The processes `run` starts and watches: gunicorn on `port`, a worker on the default queue, beat."""
    return {
        "web": [
            PYTHON,
            "-m",
            "gunicorn",
            "portal.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "8",  # a site agent's long poll holds a thread for up to 25 s (docs/operator/workers.md)
            "--access-logfile",
            "-",
        ],
        "worker": [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "-l",
            "info",
            # Threads: a copy waits on gfal2, not the CPU, and a run keeps C copies in flight (C up to 40 here).
            "--pool",
            "threads",
            "--concurrency",
            "48",
            "-Q",
            "default",
            "-n",
            "portal@%h",
        ],
        "beat": [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "portal",
            "beat",
            "-l",
            "info",
            "-s",
            str(VAR / "celerybeat-schedule"),
        ],
    }


RESTARTS_PER_MINUTE = 5  # a worker or beat that dies more often than this is broken, not unlucky


def _child_start(name: str, argv: list[str]) -> subprocess.Popen[bytes]:
    # Own session: Ctrl-C reaches this launcher only, which then stops the children in order.
    child = subprocess.Popen(argv, cwd=ROOT, start_new_session=True)
    (RUN / f"{name}.pid").write_text(f"{child.pid}\n")  # for `bin/portal stop`
    return child


def _children_watch(children: dict[str, subprocess.Popen[bytes]], commands: dict[str, list[str]]) -> None:
    """Until Ctrl-C: a worker or beat that exits is started again, as a service manager would (systemd's
    Restart=always, compose's restart: unless-stopped); the web server exiting ends the launcher."""
    restarts: dict[str, list[float]] = {name: [] for name in children}
    while True:
        for name, child in children.items():
            if child.poll() is None:
                continue
            if name == "web":
                raise SystemExit(f"{name} exited with code {child.returncode}")
            now = time.monotonic()
            restarts[name] = [at for at in restarts[name] if now - at < 60] + [now]
            if len(restarts[name]) > RESTARTS_PER_MINUTE:
                raise SystemExit(f"{name} exited {RESTARTS_PER_MINUTE} times within a minute (code {child.returncode})")
            log(f"{name} exited with code {child.returncode}: starting it again")
            children[name] = _child_start(name, commands[name])
        time.sleep(1)


def command_test(args: argparse.Namespace) -> int:
    """The whole suite in lanes at the same time and then the handbook; or, with arguments, just `pytest ARGS`."""
    stack = Stack()
    began = time.monotonic()
    lanes: list[testlanes.Lane] = []
    docs: testlanes.Lane | None = None
    whole_suite = not args.pytest_args
    try:
        stack.services()
        lanes = testlanes.test_lanes(args.pytest_args)
        for lane in lanes:
            if lane.log:
                log(f"{lane.name}: pytest {' '.join(lane.argv)} meanwhile, output in {lane.log.relative_to(ROOT)}")
            lane.start()
        testlanes.lanes_wait(lanes, log)
        if whole_suite and all(lane.returncode == 0 for lane in lanes):
            docs = testlanes.docs_build()
    finally:
        stack.shutdown()
    testlanes.logs_show(lanes)
    if whole_suite:
        for line in testlanes.summary(lanes, docs, time.monotonic() - began):
            log(line)
    failed = [lane for lane in [*lanes, *([docs] if docs else [])] if lane.returncode != 0]
    for lane in failed:
        log(f"{lane.name}: {lane.outcome()}")
    return 1 if failed else 0


def command_services(args: argparse.Namespace) -> int:
    """Start the services and print the environment to use them (for a shell or an IDE)."""
    stack = Stack()
    with contextlib.redirect_stdout(sys.stderr):  # stdout holds only the exports: `eval "$(bin/portal services)"`
        stack.services()
    for key in ("DATABASE_URL", "REDIS_URL"):
        print(f"export {key}={os.environ[key]}")
    return 0


def command_stop(args: argparse.Namespace) -> int:
    """Stop whatever a killed launcher left running: web, worker, beat, the testbed, private PostgreSQL and Redis."""
    load_dotenv()
    for name in ("beat", "worker", "web"):
        if processes.stop(RUN / f"{name}.pid"):
            log(f"stopped {name}")
    subprocess.run([PYTHON, str(ROOT / "manage.py"), "testbed", "down"], cwd=ROOT, check=False)
    PrivateRedis().stop()
    PrivatePostgres().stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="bin/portal", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the portal, a worker, beat and the testbed with a demo").set_defaults(
        func=command_run
    )
    sub.add_parser("test", help="run the whole test suite (extra arguments go to pytest)").set_defaults(
        func=command_test
    )
    sub.add_parser("services", help="start PostgreSQL/Redis and print their URLs").set_defaults(func=command_services)
    sub.add_parser("stop", help="stop private services and the testbed left running").set_defaults(func=command_stop)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "test":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.pytest_args = extra
    os.chdir(ROOT)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
