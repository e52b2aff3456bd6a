"""`manage.py testbed up|down|status|env|reset`: the local grid testbed."""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from common import processes
from testbed.grid import Testbed, TestbedConfig, remove_state


class Command(BaseCommand):
    help = "Start, stop or inspect the local grid testbed (XRootD sites, tape, WebDAV, iperf3)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action",
            choices=["up", "run", "down", "status", "env", "reset"],
            help="up: start what is not running; run: up, then stay in the foreground until "
            "stopped (for containers); down: stop all; status: every endpoint and whether "
            "it answers; env: shell exports for gfal2 clients; reset: down and delete the "
            "testbed's data and certificates",
        )
        parser.add_argument("--json", action="store_true", help="status as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        testbed = Testbed(TestbedConfig.from_settings())
        action = options["action"]
        if action in ("up", "run"):
            try:
                started = testbed.up()
            except RuntimeError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"testbed up (started: {', '.join(started) or 'nothing, all running'})")
            self._status(testbed, as_json=False)
            self.stdout.write(f"sites document: {testbed.sites_document_path}")
            if action == "run":
                self._wait_then_stop(testbed, started)
        elif action == "down":
            stopped = testbed.down()
            self.stdout.write(f"testbed down (stopped: {', '.join(stopped) or 'nothing was running'})")
        elif action == "status":
            healthy = self._status(testbed, as_json=options["json"])
            if not healthy:
                raise CommandError("some testbed endpoints do not answer (start them with: manage.py testbed up)")
        elif action == "env":
            for key, value in testbed.client_environment().items():
                self.stdout.write(f"export {key}={value}")
        elif action == "reset":
            testbed.down()
            remove_state(testbed.config)
            self.stdout.write(f"testbed reset: removed {testbed.config.directory}")

    def _wait_then_stop(self, testbed: Testbed, started: list[str]) -> None:
        """Stay up until SIGTERM/SIGINT, then stop what this command started."""
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(5):
            dead = [name for name, alive in testbed.running().items() if not alive and name in started]
            if dead:
                self.stderr.write(f"testbed processes exited: {', '.join(dead)}")
                break
        testbed.down(only=started)
        self.stdout.write("testbed stopped")

    def _status(self, testbed: Testbed, *, as_json: bool) -> bool:
        rows = testbed.status()
        if as_json:
            endpoints = [
                {
                    "name": row.endpoint.name,
                    "site": row.endpoint.site,
                    "url": row.endpoint.url,
                    "running": row.running,
                    "answers": row.answers,
                }
                for row in rows
            ]
            tokens = {"required": testbed.tokens_required}
            if testbed.tokens_required:
                tokens["issuer"] = testbed.issuer_url
                tokens["issuer_answers"] = processes.port_answers(testbed.ports()["issuer"])
            self.stdout.write(json.dumps({"tokens": tokens, "endpoints": endpoints}, indent=2))
        else:
            self.stdout.write(self._tokens_line(testbed))
            for row in rows:
                state = "up" if row.answers else ("running, not answering" if row.running else "down")
                self.stdout.write(f"  {row.endpoint.site:<10} {row.endpoint.name:<13} {row.endpoint.url:<40} {state}")
            self._tape_status(testbed)
        return all(row.answers for row in rows)

    def _tokens_line(self, testbed: Testbed) -> str:
        if not testbed.tokens_required:
            return "  tokens: not required (any bearer value works; TESTBED_TOKENS=required to check WLCG tokens)"
        answers = "up" if processes.port_answers(testbed.ports()["issuer"]) else "down"
        return (
            f"  tokens: required (WLCG JWTs of the issuer {testbed.issuer_url}, {answers}; scopes by path, the door "
            "as audience; `manage.py testbed env` prints its client)"
        )

    def _tape_status(self, testbed: Testbed) -> None:
        """The emulated tape: its configuration, drives and what it migrated and evicted."""
        try:
            tape = testbed.tape_rest_status()
        except OSError:
            return
        config = tape.get("config", {})
        self.stdout.write(
            f"  tape: {config.get('drives')} drive(s) at {config.get('drive_rate', 0) / 1e6:g} MB/s, mount "
            f"{config.get('mount_time')} s, stage delay {config.get('stage_delay')} s, migration after "
            f"{config.get('migration_delay')} s, evict {config.get('evict')}, at most "
            f"{config.get('max_request_files') or 'any number of'} files a request"
        )
        for drive in tape.get("drives", []):
            self.stdout.write(
                f"    drive {drive['index']}: tape {drive['tape'] or '-'}, {drive['mounts']} mounts, "
                f"{drive['files_read']} files read"
            )
        tapes = tape.get("tapes", {})
        self.stdout.write(
            f"    {tapes.get('files', 0)} files on {tapes.get('tapes', 0)} tapes of "
            f"{tapes.get('capacity', 0) / 1e9:g} GB; "
            f"{tape.get('migrated', 0)} files migrated, {tape.get('evicted', 0)} evicted, buffer "
            f"{tape.get('buffer_bytes_used', 0) / 1e6:g} MB, {tape.get('queue', 0)} files queued"
        )
