"""Background processes tracked by PID file: start, check, stop cleanly. Plain Python, no Django.

Used by the development stack (private PostgreSQL/Redis, web, workers) and by the testbed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Collection, Sequence
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def read_pid(pidfile: Path) -> int | None:
    """The PID recorded in pidfile when that process still runs, else None."""
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if pid_alive(pid) else None


def start(
    argv: Sequence[str],
    *,
    pidfile: Path,
    logfile: Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> int:
    """Start argv detached in its own session, output to logfile, and record its PID in pidfile."""
    logfile.parent.mkdir(parents=True, exist_ok=True)
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    with open(logfile, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    pidfile.write_text(f"{proc.pid}\n")
    return proc.pid


def stop(pidfile: Path, *, timeout: float = 10.0) -> bool:
    """Stop the process group recorded in pidfile (TERM, then KILL after timeout). True if one was running."""
    pid = read_pid(pidfile)
    pidfile.unlink(missing_ok=True)
    if pid is None:
        return False
    stop_pid(pid, timeout=timeout)
    return True


def stop_pid(pid: int, *, timeout: float = 10.0) -> None:
    """Stop a process and its group: TERM, then KILL after timeout."""
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not pid_alive(pid):
            break
        time.sleep(0.05)
    else:
        _signal_group(pid, signal.SIGKILL)
        time.sleep(0.1)
        _reap(pid)


def pids_mentioning(text: str, programs: Collection[str]) -> list[int]:
    """PIDs of live processes of the given programs (by the name in argv[0] or argv[2] for `python -m X`)
    whose command line contains text."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        names = {Path(argv[0]).name, argv[2] if len(argv) > 2 and argv[1] == "-m" else ""}
        if names & set(programs) and text in " ".join(argv) and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _reap(pid: int) -> None:
    """Collect our own exited child so that it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(preferred: int, taken: set[int] | None = None) -> int:
    """preferred if it is free (and not in taken), else the next free port above it, else one from the OS."""
    taken = taken or set()
    for port in range(preferred, min(preferred + 200, 65535)):
        if port not in taken and port_free(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, *, host: str = "127.0.0.1", timeout: float = 15.0, pid: int | None = None) -> bool:
    """Wait until host:port accepts TCP connections; False on timeout or if pid exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return True
        if pid is not None:
            _reap(pid)
            if not pid_alive(pid):
                return False
        time.sleep(0.05)
    return False


def port_answers(port: int, host: str = "127.0.0.1") -> bool:
    """True when host:port accepts a TCP connection now."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def is_root() -> bool:
    return os.geteuid() == 0


def chown_tree(path: Path, user: str) -> None:
    """Give path and everything under it to user (no-op when not root)."""
    if not is_root():
        return
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)


def as_user(argv: Sequence[str], user: str) -> list[str]:
    """argv run as user when we are root (servers such as PostgreSQL refuse to run as root)."""
    if is_root():
        return ["runuser", "-u", user, "--", *argv]
    return list(argv)


def reachable_directory(path: Path, user: str) -> Path:
    """path, or, when user cannot reach it (a checkout below /root), a directory in /var/tmp that path links to.

    Servers that drop root privileges (PostgreSQL, XRootD, nginx workers) open their files by path as user.
    """
    if path.is_symlink() or not is_root():
        return path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    if subprocess.run(as_user(["test", "-x", str(path.parent)], user), capture_output=True).returncode == 0:
        return path
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    target = Path("/var/tmp") / f"portal-{path.name}-{digest}"
    target.mkdir(parents=True, exist_ok=True)
    target.chmod(0o755)
    if path.exists() and not any(path.iterdir()):
        path.rmdir()
    if not path.exists():
        path.symlink_to(target)
    print(f"[portal] {path.parent} is closed to user {user}: {path.name} lives in {target}", flush=True)
    return target
