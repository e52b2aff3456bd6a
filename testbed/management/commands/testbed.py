"""`manage.py testbed up|down|status|env|reset|exec|worker|agents`: the local grid testbed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from common import processes
from testbed.grid import Testbed, TestbedConfig, remove_state
from testbed.grid.config import NETWORKS
from testbed.grid.netns import place_status
from testbed.site_agents import testbed_agents_start, testbed_agents_stop, testbed_portal_url


class Command(BaseCommand):
    help = "Start, stop or inspect the local grid testbed (XRootD sites, tape, WebDAV, iperf3)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action",
            choices=["up", "run", "down", "status", "env", "reset", "exec", "worker", "agents"],
            help="up: start what is not running; run: up, then stay in the foreground until "
            "stopped (for containers); down: stop all; status: every endpoint and whether "
            "it answers; env: shell exports for gfal2 clients; reset: down and delete the "
            "testbed's data and certificates; exec SITE -- CMD: run CMD in the site's network namespace; "
            "worker SITE: start (--stop: stop) a Celery worker for the site's queue in its namespace; agents: enrol "
            "and start an agent for every site inside its namespace (--stop: stop them, revoke the testbed's keys)",
        )
        parser.add_argument("site", nargs="?", help="exec and worker: the site (TB-T1-A, or its key t1a)")
        parser.add_argument("command", nargs="*", help="exec: the command to run, after --")
        parser.add_argument("--json", action="store_true", help="status as JSON")
        parser.add_argument(
            "--network",
            choices=NETWORKS,
            help="up/run: loopback (every site on 127.0.0.1, the default) or namespaces (each site in a network "
            "namespace of its own: its own address, MTU and link capacities; root only). Default: TESTBED_NETWORK",
        )
        parser.add_argument("--stop", action="store_true", help="worker, agents: stop the site's worker, the agents")
        parser.add_argument(
            "--portal-url",
            default="",
            help="agents: the portal as the sites reach it (default: PORTAL_URL at TESTBED_PORTAL_ADDRESS)",
        )
        parser.add_argument("--concurrency", type=int, default=4, help="worker: its threads (default 4)")

    def handle(self, *args: Any, **options: Any) -> None:
        config = TestbedConfig.from_settings()
        if options.get("network"):
            config.network = options["network"]
        testbed = Testbed(config)
        action = options["action"]
        if action in ("exec", "worker"):
            self._in_site(testbed, action, options)
        elif action == "agents":
            self._agents(testbed, options)
        elif action in ("up", "run"):
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
            self._agents_revoke(testbed)
            stopped = testbed.down()
            self.stdout.write(f"testbed down (stopped: {', '.join(stopped) or 'nothing was running'})")
        elif action == "status":
            healthy = self._status(testbed, as_json=options["json"])
            if not healthy:
                raise CommandError("some testbed endpoints do not answer (start them with: manage.py testbed up)")
        elif action == "env":
            # TESTBED_PORTAL_ADDRESS: where the sites reach the host (the bridge's address; 127.0.0.1 on loopback).
            network = {"TESTBED_PORTAL_ADDRESS": testbed.portal_address}
            for key, value in {**testbed.client_environment(), **network}.items():
                self.stdout.write(f"export {key}={value}")
        elif action == "reset":
            testbed.down()
            remove_state(testbed.config)
            self.stdout.write(f"testbed reset: removed {testbed.config.directory}")

    def _in_site(self, testbed: Testbed, action: str, options: dict[str, Any]) -> None:
        """exec SITE -- CMD (its exit status is the command's) and worker SITE [--stop]."""
        site = options.get("site")
        if not site:
            raise CommandError(f"{action} needs a site: manage.py testbed {action} TB-T1-A ...")
        try:
            place = testbed.place_of(site)
        except KeyError as exc:
            raise CommandError(str(exc.args[0])) from exc
        if action == "worker":
            if options["stop"]:
                stopped = testbed.site_worker_stop(place.name)
                self.stdout.write(f"worker of {place.name}: {'stopped' if stopped else 'was not running'}")
                return
            pid = testbed.site_worker_start(
                place.name, environment={**portal_urls(), **os.environ}, concurrency=options["concurrency"]
            )
            self.stdout.write(f"worker of {place.name} (queue site.{place.name}) in {place.namespace}: pid {pid}")
            return
        command = list(options.get("command") or [])
        if command[:1] == ["--"]:
            command = command[1:]
        if not command:
            raise CommandError("exec needs a command: manage.py testbed exec TB-T1-A -- ip addr")
        completed = subprocess.run(testbed.site_argv(place.name, command), check=False)
        if completed.returncode:
            raise SystemExit(completed.returncode)

    def _agents(self, testbed: Testbed, options: dict[str, Any]) -> None:
        """agents [--portal-url URL]: every site's agent enrolled and started in its namespace; --stop: stopped."""
        if options["stop"]:
            stopped, revoked = testbed_agents_stop(testbed=testbed)
            self.stdout.write(f"agents stopped: {', '.join(stopped) or 'none ran'}; {revoked} testbed keys revoked")
            return
        url = options["portal_url"] or testbed_portal_url(testbed)
        try:
            started = testbed_agents_start(testbed=testbed, portal_url=url)
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"agents of the testbed's sites, reaching the portal at {url}:")
        for agent in started:
            where = f"pid {agent.pid}, log {testbed.agent_log(agent.site)}" if agent.pid else "not started"
            self.stdout.write(f"  {agent.site:<10} {agent.note}; {where}")

    def _agents_revoke(self, testbed: Testbed) -> None:
        """down: the testbed's own agents stop and their keys are revoked (the sites' work goes back to their
        queues); a site's other agents keep theirs. Without a database, down still stops everything."""
        if not testbed.site_agents() and testbed.layout is None:
            return
        try:
            stopped, revoked = testbed_agents_stop(testbed=testbed)
        except DatabaseError as exc:
            self.stderr.write(f"the testbed's agents stopped, their keys not revoked (no database: {exc})")
            return
        if stopped or revoked:
            self.stdout.write(f"agents stopped: {', '.join(stopped) or 'none ran'}; {revoked} testbed keys revoked")

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
        if set(started) >= set(testbed.running()):
            testbed.down()  # all of it was this command's: the namespaced testbed's network too
        else:
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
            tokens: dict[str, Any] = {"required": testbed.tokens_required}
            if testbed.tokens_required:
                tokens["issuer"] = testbed.issuer_url
                tokens["issuer_answers"] = processes.port_answers(testbed.ports()["issuer"])
            network = {
                "network": testbed.network,
                "portal_address": testbed.portal_address,
                "sites": self._places(testbed),
            }
            self.stdout.write(json.dumps({"tokens": tokens, "network": network, "endpoints": endpoints}, indent=2))
        else:
            self.stdout.write(self._tokens_line(testbed))
            self._network_status(testbed)
            for row in rows:
                state = "up" if row.answers else ("running, not answering" if row.running else "down")
                self.stdout.write(f"  {row.endpoint.site:<10} {row.endpoint.name:<13} {row.endpoint.url:<40} {state}")
            self._tape_status(testbed)
        return all(row.answers for row in rows)

    def _places(self, testbed: Testbed) -> list[dict[str, Any]]:
        """Each site's place as the kernel has it now (the namespaced testbed), with its worker's PID."""
        layout = testbed.layout
        if layout is None:
            return []
        workers, agents = testbed.site_workers(), testbed.site_agents()
        places = []
        for place in layout.sites:
            now = place_status(place)
            addresses = {other.address: other.name for other in layout.sites}
            places.append(
                {
                    "site": place.name,
                    "namespace": place.namespace if now.exists else None,
                    "address": now.address,
                    "mtu": now.mtu,
                    "capacities": [
                        {"to": addresses.get(to, to), "bits_per_second": bits} for to, bits in now.shaped.items()
                    ],
                    "worker": workers.get(place.name),
                    "agent": agents.get(place.name),
                }
            )
        return places

    def _network_status(self, testbed: Testbed) -> None:
        if testbed.layout is None:
            self.stdout.write(
                "  network: loopback (every site at 127.0.0.1, MTU 65536, no capacity between sites; "
                "`testbed up --network namespaces` gives each site a place of its own, root only)"
            )
            return
        self.stdout.write(
            f"  network: namespaces on {testbed.layout.subnet}, the portal at {testbed.portal_address} "
            f"(relayed ports {', '.join(map(str, testbed.relay_ports())) or 'none'})"
        )
        for place in self._places(testbed):
            capacities = ", ".join(f"{c['bits_per_second'] / 1e9:g} Gb/s to {c['to']}" for c in place["capacities"])
            where = (
                f"{place['namespace']} {place['address']} MTU {place['mtu']}" if place["namespace"] else "no namespace"
            )
            worker = f", worker pid {place['worker']}" if place["worker"] else ""
            worker += f", agent pid {place['agent']}" if place["agent"] else ""
            self.stdout.write(f"    {place['site']:<10} {where}; {capacities or 'no capacity set'}{worker}")

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


def portal_urls() -> dict[str, str]:
    """The URLs of the portal's database and Redis as this process has them (from its settings, whether the
    environment or their defaults named them), for a worker started inside a site."""
    database = settings.DATABASES["default"]
    credentials = quote(database["USER"], safe="") + (
        f":{quote(database['PASSWORD'], safe='')}" if database.get("PASSWORD") else ""
    )
    url = f"postgres://{credentials}@{database['HOST']}:{database['PORT']}/{quote(database['NAME'], safe='')}"
    return {
        "DATABASE_URL": url,
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_RESULT_BACKEND": settings.CELERY_RESULT_BACKEND,
    }
