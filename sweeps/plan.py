"""What a sweep is asked to do, checked and turned into its steps: every problem is collected and raised at once
as a ValidationError by field, and then nothing is created.

A sweep takes sites (every ordered pair of them is a link) or explicit links, modes, concurrencies, a file size and
files per step (default: the step's concurrency), a protocol (davs: HTTP third-party copies pull, push or streamed;
root: XRootD's third-party copy, which the destination pulls) and `network` (iperf3 and the path MTU per link,
measured from the link's source towards the destination's network host). Its steps run one at a time; the disk it
needs is that of its largest step (each step deletes its copies before the next starts) and its test files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Prefetch

from challenges.choices import ActivityKind
from challenges.models import Activity
from common.problems import Problem, problems_raise
from common.units import is_whole_number
from runs.dispatch import worker_schemes
from runs.parameters import CHECKSUMS, HTTP_SCHEMES, ROOT_SCHEMES
from sites.models import Experiment, Site, StorageEndpoint

from .choices import MODES, PROTOCOLS, StepKind

MAX_STEPS = 1000
MAX_SITES = 40
MAX_CONCURRENCIES = 10
MAX_CONCURRENCY = 1000
MAX_FILE_SIZE = 10**13
MAX_FILE_COUNT = 100_000
DEFAULT_FILE_SIZE = 10**9
DEFAULT_NETWORK_DURATION = 10
MAX_NETWORK_DURATION = 600
FIELDS = {
    "name",
    "sites",
    "links",
    "modes",
    "concurrency",
    "file_size",
    "file_count",
    "protocol",
    "network",
    "network_duration",
    "experiment",
    "checksum",
}


@dataclass
class StepPlan:
    kind: str
    source: Site
    destination: Site
    mode: str = ""
    concurrency: int | None = None
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class SweepPlan:
    name: str
    parameters: dict[str, Any]
    steps: list[StepPlan]
    # endpoint URL -> bytes the sweep needs there at most (its largest step, and its test file at a source)
    space_needs: dict[str, int]
    largest_step: dict[str, tuple[int, int]]  # endpoint URL -> (files, file size) of the largest step writing there


def _whole(
    problems: list[Problem], data: dict[str, Any], name: str, default: int | None, *, low: int, high: int
) -> int:
    value = data.get(name, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append((name, f"{name} must be a whole number from {low} to {high}, not {value!r}"))
        return 0
    if not low <= value <= high:
        problems.append((name, f"{name} must be from {low} to {high}, not {value}"))
        return 0
    return value


def _sites_by_name(names: set[str]) -> dict[str, Site]:
    disk = StorageEndpoint.objects.filter(kind="disk").order_by("url")
    sites = Site.objects.filter(name__in=names).prefetch_related(
        Prefetch("endpoints", queryset=disk, to_attr="disk_endpoints"), "network_hosts"
    )
    return {site.name: site for site in sites}


def _links(problems: list[Problem], data: dict[str, Any]) -> list[tuple[str, str]]:
    """The ordered (source, destination) names the sweep measures: every pair of `sites`, or `links`."""
    sites, links = data.get("sites"), data.get("links")
    if (sites is None) == (links is None):
        problems.append(("sites", 'give "sites" (every ordered pair is a link) or "links", one of the two'))
        return []
    if sites is not None:
        if not isinstance(sites, list) or not all(isinstance(name, str) and name for name in sites):
            problems.append(("sites", f"sites must be a list of site names, not {str(sites)[:200]!r}"))
            return []
        if len(set(sites)) != len(sites):
            problems.append(("sites", "a site is named twice"))
        if not 2 <= len(set(sites)) <= MAX_SITES:
            problems.append(("sites", f"give from 2 to {MAX_SITES} sites, not {len(set(sites))}"))
            return []
        unique = list(dict.fromkeys(sites))
        return [(source, destination) for source in unique for destination in unique if source != destination]
    if not isinstance(links, list) or not links:
        problems.append(("links", 'links must be a non-empty list of {"source": SITE, "destination": SITE}'))
        return []
    pairs: list[tuple[str, str]] = []
    for number, link in enumerate(links, start=1):
        if (
            not isinstance(link, dict)
            or set(link) != {"source", "destination"}
            or not all(isinstance(value, str) and value for value in link.values())
        ):
            problems.append(("links", f'link {number}: give {{"source": SITE, "destination": SITE}}, not {link!r}'))
        elif link["source"] == link["destination"]:
            problems.append(("links", f"link {number}: {link['source']} to itself is not a link"))
        elif (link["source"], link["destination"]) in pairs:
            problems.append(("links", f"link {number}: {link['source']} -> {link['destination']} is given twice"))
        else:
            pairs.append((link["source"], link["destination"]))
    return pairs


def _endpoint(site: Site, protocol: str) -> StorageEndpoint | None:
    schemes = HTTP_SCHEMES if protocol == "davs" else ROOT_SCHEMES
    disk: list[StorageEndpoint] = getattr(site, "disk_endpoints", [])  # prefetched by _sites_by_name
    spoken = [e for e in disk if e.scheme in schemes and e.scheme in worker_schemes()]
    return next((e for scheme in schemes for e in spoken if e.scheme == scheme), None)


def _network_host(site: Site) -> tuple[str, int] | None:
    """The site's first network host as (host, port): "host:port", or a bare name (iperf3's port 5201)."""
    hosts = [host.address for host in site.network_hosts.all()]
    if not hosts:
        return None
    host, _, port = hosts[0].rpartition(":") if hosts[0].count(":") == 1 else (hosts[0], "", "")
    return host, int(port) if is_whole_number(port) else 5201


def _modes(problems: list[Problem], data: dict[str, Any], protocol: str) -> list[str]:
    modes = data.get("modes")
    if not isinstance(modes, list) or not modes or not all(mode in MODES for mode in modes):
        problems.append(("modes", f"modes must be a non-empty list of {', '.join(MODES)}, not {str(modes)[:200]!r}"))
        return []
    if len(set(modes)) != len(modes):
        problems.append(("modes", "a mode is named twice"))
    if protocol == "root" and set(modes) - {"pull"}:
        problems.append(
            (
                "modes",
                "with protocol root a copy is XRootD's third-party copy, which the destination pulls: give modes "
                '["pull"], or protocol davs for push and streamed',
            )
        )
    return list(dict.fromkeys(modes))


def _concurrencies(problems: list[Problem], data: dict[str, Any]) -> list[int]:
    values = data.get("concurrency")
    if (
        not isinstance(values, list)
        or not 1 <= len(values) <= MAX_CONCURRENCIES
        or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_CONCURRENCY for v in values)
    ):
        problems.append(
            (
                "concurrency",
                f"concurrency must be a list of 1 to {MAX_CONCURRENCIES} whole numbers from 1 to {MAX_CONCURRENCY}, "
                f"not {str(values)[:200]!r}",
            )
        )
        return []
    return sorted(set(values))


def _where(data: dict[str, Any]) -> str:
    """The field that named the sites: sites, else links."""
    return "sites" if data.get("sites") is not None else "links"


@dataclass(frozen=True)
class _Asked:
    """The sweep's fields other than its sites and links, each checked (a bad one's problem is listed)."""

    name: str
    protocol: str
    network: Any
    duration: int
    file_size: int
    file_count: int | None
    modes: list[str]
    concurrencies: list[int]
    checksum: Any
    experiment: Any


def _asked(problems: list[Problem], data: dict[str, Any], activity: Activity | None) -> _Asked:
    for name in sorted(set(data) - FIELDS - {"activity"}):
        problems.append(("non_field_errors", f"unknown field {name!r} (known: {', '.join(sorted(FIELDS))})"))
    given_name = data.get("name")
    name = given_name.strip() if isinstance(given_name, str) else ""
    if not name or len(name) > 200:
        problems.append(("name", "name is required: up to 200 characters"))
    protocol = data.get("protocol") or "davs"
    if protocol not in PROTOCOLS:
        problems.append(("protocol", f"protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}"))
        protocol = "davs"
    network = data.get("network", True)
    if not isinstance(network, bool):
        problems.append(("network", f"network must be true or false, not {network!r}"))
    duration = _whole(problems, data, "network_duration", DEFAULT_NETWORK_DURATION, low=1, high=MAX_NETWORK_DURATION)
    file_size = _whole(problems, data, "file_size", DEFAULT_FILE_SIZE, low=1, high=MAX_FILE_SIZE)
    file_count = None  # a step of C files in parallel copies C files, unless told otherwise
    if data.get("file_count") is not None:
        file_count = _whole(problems, data, "file_count", None, low=1, high=MAX_FILE_COUNT) or None
    modes = _modes(problems, data, protocol)
    concurrencies = _concurrencies(problems, data)
    if activity is not None and activity.kind != ActivityKind.TRANSFER:
        problems.append(("activity", f"a sweep counts for a transfer activity, not a {activity.kind} activity"))
    checksum = data.get("checksum") or "ADLER32"
    if checksum not in CHECKSUMS:
        problems.append(("checksum", f"checksum must be one of {', '.join(CHECKSUMS)}, not {str(checksum)[:40]!r}"))
    experiment = data.get("experiment")
    if experiment is not None and not Experiment.objects.filter(name__iexact=str(experiment)).exists():
        problems.append(("experiment", f"no experiment named {str(experiment)[:100]!r}"))
    return _Asked(name, protocol, network, duration, file_size, file_count, modes, concurrencies, checksum, experiment)


def _sites_and_endpoints(
    problems: list[Problem], data: dict[str, Any], links: list[tuple[str, str]], asked: _Asked
) -> tuple[dict[str, Site], dict[str, StorageEndpoint]]:
    """The links' sites by name and each one's endpoint in the sweep's protocol; a site that is missing, has no
    such endpoint or (when the sweep measures the network) no network host as a destination is a problem."""
    sites = _sites_by_name({name for link in links for name in link})
    for missing in sorted({n for link in links for n in link} - set(sites)):
        problems.append((_where(data), f"no site named {missing!r}"))
    endpoints: dict[str, StorageEndpoint] = {}
    for site in sites.values():
        endpoint = _endpoint(site, asked.protocol)
        if endpoint is None:
            problems.append((_where(data), f"{site.name} has no {asked.protocol} disk endpoint"))
        else:
            endpoints[site.name] = endpoint
    if asked.network is True:
        for site_name in sorted({destination for _, destination in links} & set(sites)):
            if _network_host(sites[site_name]) is None:
                problems.append(
                    (
                        "network",
                        f"{site_name} has no network host (an iperf3 server): register one or set network false",
                    )
                )
    return sites, endpoints


def _network_steps(links: list[tuple[str, str]], sites: dict[str, Site], asked: _Asked) -> list[StepPlan]:
    steps: list[StepPlan] = []
    for source, destination in links:
        host, port = _network_host(sites[destination]) or ("", 0)
        steps.append(
            StepPlan(
                StepKind.NETWORK,
                sites[source],
                sites[destination],
                parameters={"host": host, "port": port, "duration": asked.duration},
            )
        )
    return steps


def _transfer_steps(
    links: list[tuple[str, str]], sites: dict[str, Site], endpoints: dict[str, StorageEndpoint], asked: _Asked
) -> tuple[list[StepPlan], dict[str, int], dict[str, tuple[int, int]]]:
    """Each mode, concurrency and link in turn; with the bytes the sweep needs at each endpoint at most (its
    largest step there, and each source's test file) and that largest step's (files, file size)."""
    steps: list[StepPlan] = []
    needs: dict[str, int] = {}
    largest: dict[str, tuple[int, int]] = {}
    file_size = asked.file_size
    for mode in asked.modes:
        for concurrency in asked.concurrencies:
            count = asked.file_count or concurrency
            for source, destination in links:
                target = endpoints[destination].url
                steps.append(
                    StepPlan(
                        StepKind.TRANSFER,
                        sites[source],
                        sites[destination],
                        mode,
                        concurrency,
                        {
                            "source": endpoints[source].url,
                            "destinations": [target],
                            "file_size": file_size,
                            "file_count": count,
                            "concurrency": concurrency,
                            "copy_mode": "native" if asked.protocol == "root" else mode,
                            "checksum": asked.checksum,
                        },
                    )
                )
                if count * file_size > needs.get(target, 0):
                    needs[target], largest[target] = count * file_size, (count, file_size)
    for url in {endpoints[source].url for source, _ in links}:  # each source's test file (made once, kept)
        needs[url] = needs.get(url, 0) + file_size
    return steps, needs, largest


def sweep_plan(data: dict[str, Any], *, activity: Activity | None = None) -> SweepPlan:
    """The checked sweep and its steps (network steps first, then each mode, concurrency and link in turn)."""
    problems: list[Problem] = []
    asked = _asked(problems, data, activity)
    links = _links(problems, data)
    sites, endpoints = _sites_and_endpoints(problems, data, links, asked)
    network_steps = len(links) if asked.network is True else 0
    total = len(links) * len(asked.modes) * len(asked.concurrencies) + network_steps
    if total > MAX_STEPS:
        problems.append(("non_field_errors", f"the sweep would have {total} steps: at most {MAX_STEPS}"))
    problems_raise(problems)
    steps = _network_steps(links, sites, asked) if asked.network else []
    transfer_steps, needs, largest = _transfer_steps(links, sites, endpoints, asked)
    steps.extend(transfer_steps)
    parameters = {
        "sites": data.get("sites"),
        "links": [{"source": s, "destination": d} for s, d in links],
        "modes": asked.modes,
        "concurrency": asked.concurrencies,
        "file_size": asked.file_size,
        "file_count": asked.file_count,
        "protocol": asked.protocol,
        "network": asked.network,
        "network_duration": asked.duration,
        "experiment": asked.experiment,
        "checksum": asked.checksum,
    }
    if asked.experiment is not None:
        for step in steps:
            step.parameters["experiment"] = asked.experiment
    return SweepPlan(asked.name, parameters, steps, needs, largest)


def sweep_space_problems(plan: SweepPlan, free_space: Any) -> list[Problem]:
    """Why the sweep cannot fit, with the numbers: for each endpoint that says its free space, what the sweep
    needs there at most (one step at a time: its largest step's copies, and the test file where it is a source)."""
    problems: list[Problem] = []
    for url, need in sorted(plan.space_needs.items()):
        free = free_space(url)
        if free is None or need <= free:
            continue
        files, size = plan.largest_step.get(url, (0, plan.parameters["file_size"]))
        what = f"its largest step writes {files} x {size / 1e9:.3g} GB there" if files else "its test file"
        problems.append(
            (
                "file_size",
                f"not enough space at {url}: the sweep needs {need / 1e9:.3g} GB there at most ({what}, one step at "
                f"a time, each step's copies deleted before the next) and {free / 1e9:.3g} GB are free; give fewer "
                "or smaller files, or free space",
            )
        )
    return problems
