"""What a run is asked to do: its parameters checked for type and range, completed from the plan (an activity's
sites, endpoints and the files its challenge's tape writes left), and turned into a plan of files (`run_plan`).
Every problem is collected and raised at once as a ValidationError by field, and then nothing is created."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q

from challenges.choices import ActivityKind
from challenges.models import Activity
from common.units import is_whole_number
from measure.testfiles import test_file_url
from sites.matching import endpoint_serves, storage_for_url
from sites.models import Experiment, Site, StorageEndpoint

from .choices import FileState
from .dispatch import worker_schemes
from .models import RunFile

TRANSFER_MODES = ("pull", "push", "streamed", "native")
CHECKSUMS = ("ADLER32", "MD5", "CRC32", "none")
DEFAULT_TIMEOUT = 300  # seconds a copy may take, at least
MIN_FILE_RATE = 5e6  # bytes/s: a copy's default timeout gives each file at least this rate
DEFAULT_STALL_TIMEOUT = 120  # seconds with nothing moving after which a copy is stopped and tried again, at least
MIN_CHECKSUM_RATE = 50e6  # bytes/s: the default stall timeout lets a storage checksum a whole file at this rate
# Seconds a copy may wait for its first byte, at least: a server queues third-party copies (measured on the testbed:
# 40 native copies of 512 MiB at once waited up to 58 s for their first byte, the queue draining at 370 MB/s). Twice
# that, or the time for the run's C copies to pass through a queue draining at MIN_QUEUE_RATE when longer.
DEFAULT_FIRST_BYTE_TIMEOUT = 120
MIN_QUEUE_RATE = 100e6  # bytes/s
HTTP_SCHEMES = ("davs", "https", "dav", "http")
ROOT_SCHEMES = ("root", "roots", "xroot", "xroots")

COMMON_PARAMETERS = {"experiment", "max_duration"}
KIND_PARAMETERS: dict[str, set[str]] = {
    ActivityKind.TRANSFER: {
        "source",
        "destinations",
        "files",
        "file_size",
        "file_count",
        "concurrency",
        "copy_mode",
        "streams",
        "timeout",
        "stall_timeout",
        "first_byte_timeout",
        "checksum",
        "keep_copies",
    },
    ActivityKind.STAGING: {"urls", "bulk_size", "pin_time", "timeout", "poll_interval", "endpoint", "recall_run"},
    ActivityKind.NETWORK: {"host", "port", "streams", "duration", "reverse"},
    ActivityKind.CACHE: {"origin_urls", "cache_url"},
    ActivityKind.IO: {"endpoint", "file_size", "timeout"},
}
# A tape write (DT) is a transfer run whose files go to the target sites' tape endpoints (their disk buffers, which
# the site migrates to tape): the same parameters, and the same dispatch.
KIND_PARAMETERS[ActivityKind.TAPE_WRITE] = KIND_PARAMETERS[ActivityKind.TRANSFER]
TRANSFER_KINDS = (ActivityKind.TRANSFER, ActivityKind.TAPE_WRITE)


class _Problems:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def add(self, field: str, message: str) -> None:
        self.errors.setdefault(field, []).append(message)

    def raise_any(self) -> None:
        if self.errors:
            raise ValidationError(self.errors)


def _integer(
    problems: _Problems, parameters: dict[str, Any], name: str, default: int | None, *, low: int, high: int
) -> int | None:
    value = parameters.get(name, default)
    if value is None:
        problems.add(name, f"{name} is required (a whole number from {low} to {high})")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(name, f"{name} must be a whole number, not {value!r}")
        return None
    if not low <= value <= high:
        problems.add(name, f"{name} must be from {low} to {high}, not {value}")
        return None
    return value


def _url(problems: _Problems, field: str, value: Any) -> str | None:
    """A storage URL of a scheme the workers speak, else a problem."""
    if not isinstance(value, str) or "://" not in value:
        problems.add(field, f"not a storage URL: {value!r}")
        return None
    scheme = urlsplit(value).scheme.lower()
    if scheme not in worker_schemes():
        spoken = ", ".join(sorted(worker_schemes()))
        problems.add(field, f"the workers cannot speak {scheme}:// ({value}); their gfal2 speaks {spoken}")
        return None
    if scheme == "file" and not settings.SITES_ALLOW_FILE_ENDPOINTS:
        problems.add(field, f"file:// URLs are allowed only on a testbed ({value})")
        return None
    return value


def _serving(endpoints: Sequence[StorageEndpoint], experiment: Experiment | None) -> list[StorageEndpoint]:
    """The endpoints that serve the run's experiment (sites.matching: those naming it, or naming none, their
    site's); all of them for a run of no experiment."""
    if experiment is None:
        return list(endpoints)
    return [endpoint for endpoint in endpoints if endpoint_serves(endpoint=endpoint, experiment_id=experiment.pk)]


def _serving_note(experiment: Experiment | None) -> str:
    return f" serving {experiment}" if experiment is not None else ""


def _pick_endpoint(
    site: Site, *, prefer: Sequence[str], kind: str = "disk", experiment: Experiment | None = None
) -> StorageEndpoint | None:
    """The site's endpoint of this kind (disk, tape) that serves the experiment and that the workers speak, in the
    order of schemes `prefer`."""
    spoken = [e for e in site.endpoints.all() if e.kind == kind and e.scheme in worker_schemes()]
    endpoints = _serving(spoken, experiment)
    for scheme in prefer:
        for endpoint in endpoints:
            if endpoint.scheme == scheme:
                return endpoint
    return endpoints[0] if endpoints else None


def _scheme_preference(copy_mode: str) -> tuple[str, ...]:
    if copy_mode in ("pull", "push", "streamed"):
        return HTTP_SCHEMES
    if copy_mode == "native":
        return ROOT_SCHEMES
    return ("root", "davs", "https")


def _copy_mode_problem(copy_mode: str, files: Sequence[tuple[str, str, int]]) -> str:
    """Why these files cannot be copied in copy_mode ("" when they can): a requested mode is done or refused,
    never silently replaced by another (gfal2 copies root:// to root:// as XRootD third-party copies whatever the
    HTTP plugin is told)."""
    for source, destination, _ in files:
        schemes = (urlsplit(source).scheme.lower(), urlsplit(destination).scheme.lower())
        if copy_mode == "native" and not all(scheme in ROOT_SCHEMES for scheme in schemes):
            return "native (XRootD third-party) copies need root:// sources and destinations"
        if copy_mode in ("pull", "push") and not all(scheme in HTTP_SCHEMES for scheme in schemes):
            return (
                f"{copy_mode} is an HTTP third-party copy: source and destinations must be davs:// or https:// "
                f"endpoints, not {schemes[0]}:// to {schemes[1]}://"
            )
        if copy_mode == "streamed" and all(scheme in ROOT_SCHEMES for scheme in schemes):
            return (
                "streamed copies need a davs:// or https:// end: between two root:// endpoints XRootD makes a "
                "third-party copy (use native)"
            )
    return ""


def _activity_transfer_defaults(
    activity: Activity, copy_mode: str, problems: _Problems, experiment: Experiment | None
) -> dict[str, Any]:
    """source and destinations of an activity: its source site's endpoint and its targets' sites' endpoints, those
    that serve the run's experiment."""
    defaults: dict[str, Any] = {}
    prefer = _scheme_preference(copy_mode)
    if activity.source is None:
        return defaults
    serving = _serving_note(experiment)
    source = _pick_endpoint(activity.source, prefer=prefer, experiment=experiment)
    if source is None:
        problems.add("source", f"the source site {activity.source} has no disk endpoint{serving} the workers can speak")
        return defaults
    defaults["source"] = source.url
    destinations: list[str] = []
    for target in activity.targets.select_related("site", "link_to"):
        site = target.link_to if target.is_link else (target.site if target.direction == "in" else None)
        if site is None or site.pk == activity.source_id:
            continue
        kind = "tape" if activity.kind == ActivityKind.TAPE_WRITE else "disk"
        # The source's own scheme first (a third-party copy between alike doors), but a streamed copy needs an HTTP
        # end: from a root://-only source (the throttled origin) it writes to the destination's davs:// door.
        first = () if copy_mode == "streamed" else (source.scheme,)
        endpoint = _pick_endpoint(site, prefer=(*first, *prefer), kind=kind, experiment=experiment)
        if endpoint is None:
            problems.add("destinations", f"{site} has no {kind} endpoint{serving} the workers can speak")
        elif endpoint.url not in destinations:
            destinations.append(endpoint.url)
    if destinations:
        defaults["destinations"] = destinations
    return defaults


@dataclass
class RunPlan:
    """What run_start creates: the run's parameters and, for a transfer, its files."""

    parameters: dict[str, Any]
    files: list[tuple[str, str, int]]  # source URL, destination URL, size
    site: Site | None
    experiment: Experiment | None
    deadline_seconds: float


def _transfer_plan(
    kind: str, activity: Activity | None, given: dict[str, Any], problems: _Problems, experiment: Experiment | None
) -> RunPlan:
    copy_mode = given.get("copy_mode", activity.copy_mode if activity else "") or ""
    if copy_mode not in ("", *TRANSFER_MODES):
        problems.add("copy_mode", f"copy_mode must be one of {', '.join(TRANSFER_MODES)} or blank, not {copy_mode!r}")
        copy_mode = ""
    defaults: dict[str, Any] = {}
    if activity is not None:
        defaults = {
            "file_size": activity.file_size,
            "file_count": activity.file_count,
            "concurrency": activity.concurrency,
        }
        if "source" not in given or "destinations" not in given:
            defaults.update(_activity_transfer_defaults(activity, copy_mode, problems, experiment))
    merged = {**defaults, **{k: v for k, v in given.items() if v is not None}}
    streams = _integer(problems, merged, "streams", 1, low=1, high=64)
    concurrency = _integer(problems, merged, "concurrency", 10, low=1, high=1000)
    # A tape write keeps its files by default: the recalls (A-DT) read them back.
    keep_copies = merged.get("keep_copies", kind == ActivityKind.TAPE_WRITE)
    if not isinstance(keep_copies, bool):
        problems.add("keep_copies", f"keep_copies must be true or false, not {keep_copies!r}")
    checksum = merged.get("checksum", "ADLER32")
    if checksum not in CHECKSUMS:
        problems.add("checksum", f"checksum must be one of {', '.join(CHECKSUMS)}, not {checksum!r}")
    if "files" in merged:
        files, file_size = _explicit_files(problems, merged["files"]), 0
        source_url = files[0][0] if files else None
    else:
        files, source_url, file_size = _planned_files(problems, merged)
    mode_problem = _copy_mode_problem(copy_mode, files)
    if mode_problem:
        problems.add("copy_mode", mode_problem)
    timeouts = _copy_timeouts(
        problems, merged, largest=max((size for _, _, size in files), default=0), concurrency=concurrency
    )
    parameters = {
        "copy_mode": copy_mode,
        "streams": streams,
        **timeouts,
        "concurrency": concurrency,
        "checksum": checksum,
        "keep_copies": keep_copies,
    }
    if "files" not in merged:
        parameters.update(
            source=source_url,
            destinations=merged.get("destinations"),
            file_size=file_size,
            file_count=len(files),
        )
    source_site = _site_of_url(source_url, experiment) if source_url else None
    rounds = math.ceil(len(files) / concurrency) if files and concurrency else 1
    return RunPlan(
        parameters=parameters,
        files=files,
        site=source_site or (activity.source if activity else None),
        experiment=experiment,
        deadline_seconds=rounds * timeouts["timeout"] * 2 + 600,
    )


def copy_timeouts_default(*, largest: int, concurrency: int) -> dict[str, int]:
    """The `timeout`, `stall_timeout` and `first_byte_timeout` a run of C files of this size gets by default (for a
    caller that copies without a run, such as bench/probes.py's bare side, bounded the same way)."""
    return _copy_timeouts(_Problems(), {}, largest=largest, concurrency=concurrency)


def _explicit_files(problems: _Problems, entries: Any) -> list[tuple[str, str, int]]:
    """Explicit pairs of an ad hoc run: each source already exists; sizes are learnt from the copies."""
    files: list[tuple[str, str, int]] = []
    if not isinstance(entries, list) or not entries:
        problems.add("files", 'files must be a non-empty list of {"source": URL, "destination": URL}')
        return files
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or set(entry) - {"source", "destination"}:
            problems.add("files", f'file {number}: give {{"source": URL, "destination": URL}}, not {entry!r}')
            continue
        source = _url(problems, "files", entry.get("source"))
        destination = _url(problems, "files", entry.get("destination"))
        if source and destination:
            files.append((source, destination, 0))
    return files


def _planned_files(problems: _Problems, merged: dict[str, Any]) -> tuple[list[tuple[str, str, int]], str | None, int]:
    """(files, source URL, file size) of a run of `file_count` copies of a test file from `source`, round-robin to
    `destinations`, each to `DEST/portal-runs/{run}/file-NNNNN` (the run's directory is named when it is made)."""
    files: list[tuple[str, str, int]] = []
    source_url: str | None = None
    file_size = _integer(problems, merged, "file_size", None, low=1, high=10**13) or 0
    file_count = _integer(problems, merged, "file_count", None, low=1, high=100_000) or 0
    if "source" not in merged:
        problems.add("source", "give the source endpoint URL (or run an activity that has a source site)")
    else:
        source_url = _url(problems, "source", merged["source"])
    destinations = merged.get("destinations")
    if destinations is None:
        problems.add(
            "destinations",
            "give destination endpoint URLs (or run an activity with targets into other sites or links)",
        )
        destinations = []
    elif not isinstance(destinations, list) or not destinations:
        problems.add("destinations", "destinations must be a non-empty list of endpoint URLs")
        destinations = []
    checked = [_url(problems, "destinations", value) for value in destinations]
    if source_url and file_size and file_count and checked and all(checked):
        source_file = test_file_url(source_url, file_size)
        for index in range(file_count):
            base = str(checked[index % len(checked)]).rstrip("/")
            files.append((source_file, f"{base}/portal-runs/{{run}}/file-{index:05d}", file_size))
    return files, source_url, file_size


def _copy_timeouts(problems: _Problems, merged: dict[str, Any], *, largest: int, concurrency: int) -> dict[str, int]:
    """A run's `timeout`, `stall_timeout` and `first_byte_timeout` (seconds), as given or from its largest file."""
    given = {
        name: _integer(problems, merged, name, None, low=low, high=86400) if name in merged else None
        for name, low in (("timeout", 1), ("stall_timeout", 0), ("first_byte_timeout", 0))
    }
    # Slow enough for a busy link: at least 5 MB/s per file (a 5 GB file gets 1000 s), never under 5 minutes.
    timeout = given["timeout"] or max(DEFAULT_TIMEOUT, math.ceil(largest / MIN_FILE_RATE))
    stall = given["stall_timeout"]
    if stall is None:
        # Nothing moving for 2 minutes is a stall, unless the file is so large that checksumming it takes longer.
        stall = max(DEFAULT_STALL_TIMEOUT, math.ceil(largest / MIN_CHECKSUM_RATE))
    first_byte = given["first_byte_timeout"]
    if first_byte is None:
        queued = math.ceil((concurrency or 1) * largest / MIN_QUEUE_RATE)
        first_byte = min(timeout, max(DEFAULT_FIRST_BYTE_TIMEOUT, queued))
    return {"timeout": timeout, "stall_timeout": stall, "first_byte_timeout": first_byte}


def stall_timeout(parameters: dict[str, Any]) -> int:
    """The seconds with nothing moving after which a copy of a run with these parameters is stopped (0: never);
    runs made before the stall guard have none stored and get the floor."""
    value = parameters.get("stall_timeout")
    return DEFAULT_STALL_TIMEOUT if value is None else int(value)


def _activity_sites(activity: Activity) -> list[Site]:
    """The sites an activity's probe points at: its targets' sites (the far end of a link), then its source."""
    sites: list[Site] = []
    for target in activity.targets.select_related("site", "link_to"):
        site = target.link_to if target.is_link else target.site
        if site is not None and site not in sites:
            sites.append(site)
    if activity.source is not None and activity.source not in sites:
        sites.append(activity.source)
    return sites


def _site_of_url(url: str, experiment: Experiment | None) -> Site | None:
    return storage_for_url(url, experiment_id=experiment.pk if experiment else None)[0]


def _activity_probe_defaults(
    kind: str, activity: Activity, given: dict[str, Any], problems: _Problems, experiment: Experiment | None
) -> dict[str, Any]:
    """What a staging, network or io activity's run takes from the plan when it is not given, so that Run on the
    clock and auto-run work without typing URLs: network, the first of its sites' network hosts; io, a disk
    endpoint of its sites (root:// first) and the activity's file size; staging (a recall, A-DT), the files that
    this challenge's tape-write runs of the same experiment wrote to its sites' tape (`_recall_defaults`). A cache
    study needs origin files and a cache that the registry does not pair: give them."""
    sites = _activity_sites(activity)
    names = ", ".join(site.name for site in sites) or "no site (give it targets or a source)"
    defaults: dict[str, Any] = {}
    if kind == ActivityKind.NETWORK:
        hosts = [host.address for site in sites for host in site.network_hosts.all()]
        if not hosts:
            problems.add("host", f"none of the activity's sites ({names}) has a network host: give host")
            return defaults
        host, _, port = hosts[0].rpartition(":") if hosts[0].count(":") == 1 else (hosts[0], "", "")
        defaults["host"] = host
        if is_whole_number(port):
            defaults["port"] = int(port)
    elif kind == ActivityKind.IO:
        prefer = ("root", "davs", "https")
        endpoints = [e for site in sites if (e := _pick_endpoint(site, prefer=prefer, experiment=experiment))]
        if not endpoints:
            serving = _serving_note(experiment)
            problems.add(
                "endpoint", f"none of the activity's sites ({names}) has a disk endpoint{serving}: give endpoint"
            )
            return defaults
        defaults["endpoint"] = endpoints[0].url
    elif kind == ActivityKind.STAGING:
        defaults.update(_recall_defaults(activity, sites, names, given, problems, experiment=experiment))
    return defaults


def _recall_defaults(
    activity: Activity,
    sites: list[Site],
    names: str,
    given: dict[str, Any],
    problems: _Problems,
    *,
    experiment: Experiment | None,
) -> dict[str, Any]:
    """The files an A-DT run recalls: those the tape-write (DT) runs of this challenge and this experiment wrote
    to the tape of its sites, newest first, up to the activity's file count, or those of one DT run
    (`recall_run`); each through the tape endpoint the run names (`endpoint`), else the site's Tape REST door
    (davs/https), else its root:// prepare door, whatever door wrote it (the same tape behind every door)."""
    spoken = [e for site in sites for e in site.endpoints.all() if e.kind == "tape" and e.scheme in worker_schemes()]
    tape = _serving(spoken, experiment)
    if not tape:
        serving = _serving_note(experiment)
        problems.add("urls", f"none of the activity's sites ({names}) has a tape endpoint{serving}: give urls")
        return {}
    wanted = given.get("endpoint")
    if wanted is not None:
        through = next((e for e in tape if e.url.rstrip("/") == str(wanted).rstrip("/")), None)
        if through is None:
            known = ", ".join(e.url for e in tape)
            problems.add("endpoint", f"{wanted!r} is not a tape endpoint of {names} (they are: {known})")
            return {}
    else:
        through = next((e for scheme in (*HTTP_SCHEMES, *ROOT_SCHEMES) for e in tape if e.scheme == scheme), tape[0])
    doors = [e.url.rstrip("/") for e in tape if e.site_id == through.site_id]
    written = RunFile.objects.filter(state=FileState.DONE, run__kind=ActivityKind.TAPE_WRITE)
    recall_run = given.get("recall_run")
    if recall_run is not None:
        if isinstance(recall_run, bool) or not isinstance(recall_run, int):
            problems.add("recall_run", f"recall_run must be the id of a tape-write run, not {recall_run!r}")
            return {}
        written = written.filter(run_id=recall_run)
        whose = f"tape-write run {recall_run}"
    else:
        written = written.filter(
            run__activity__challenge_id=activity.challenge_id, run__activity__experiment_id=activity.experiment_id
        )
        whose = f"no tape-write run of {activity.experiment} in this challenge"
    rows = list(
        written.filter(_starts_with_any("destination_url", doors))
        .order_by("-end", "-pk")
        .values_list("destination_url", "run_id")[: activity.file_count or None]
    )
    if not rows:
        field = "recall_run" if recall_run is not None else "urls"
        problems.add(
            field,
            f"{whose} has written files to the tape of {through.site}: "
            "run the tape-write (DT) activity first, or give urls",
        )
        return {}
    return {
        "urls": [_through_door(url, doors, through.url.rstrip("/")) for url, _ in rows],
        "endpoint": through.url,
        "recalls_runs": sorted({run_id for _, run_id in rows}),
    }


def _through_door(url: str, doors: Sequence[str], door: str) -> str:
    """The URL of the same file through another door of the same storage (root://h:1//data/f -> davs://h:2/data/f)."""
    for base in sorted(doors, key=len, reverse=True):
        if url.startswith(base + "/"):
            return door + url[len(base) :]
    return url


def _starts_with_any(field: str, prefixes: Sequence[str]) -> Q:
    condition = Q()
    for prefix in prefixes:
        condition |= Q(**{f"{field}__startswith": prefix + "/"})
    return condition


def _probe_plan(
    kind: str, activity: Activity | None, given: dict[str, Any], problems: _Problems, experiment: Experiment | None
) -> RunPlan:
    """Parameters of the one-task kinds (staging, network, cache, io), checked for type and range; an activity's
    run takes what is not given from the plan (`_activity_probe_defaults`)."""
    needs: dict[str, str] = {ActivityKind.NETWORK: "host", ActivityKind.IO: "endpoint", ActivityKind.STAGING: "urls"}
    wanted = needs.get(kind, "")
    why_missing: list[str] = []  # why the plan could not give it: said instead of the generic "required"
    if activity is not None and wanted and given.get(wanted) is None:
        given = {**_activity_probe_defaults(kind, activity, given, problems, experiment), **given}
        given = {name: value for name, value in given.items() if value is not None}
        why_missing = list(problems.errors.get(wanted, []))
    parameters: dict[str, Any] = {}
    site: Site | None = activity.source if activity else None
    deadline = 3600.0
    if kind == ActivityKind.STAGING:
        urls = given.get("urls")
        if not isinstance(urls, list) or not urls:
            problems.add("urls", "urls must be a non-empty list of file URLs on a tape endpoint")
            urls = []
        parameters["urls"] = [_url(problems, "urls", url) for url in urls]
        parameters["bulk_size"] = _integer(problems, given, "bulk_size", 1000, low=1, high=1_000_000)
        parameters["pin_time"] = _integer(problems, given, "pin_time", 3600, low=1, high=10**7)
        parameters["timeout"] = _integer(problems, given, "timeout", 3600, low=1, high=10**6)
        interval = given.get("poll_interval", 2.0)
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0.1 <= interval <= 600:
            problems.add("poll_interval", f"poll_interval must be seconds from 0.1 to 600, not {interval!r}")
        parameters["poll_interval"] = interval
        for name in ("endpoint", "recall_run", "recalls_runs"):  # what the plan chose, shown on the run page
            if given.get(name) is not None:
                parameters[name] = given[name]
        deadline = (parameters["timeout"] or 3600) + 600
        if urls and isinstance(urls[0], str):
            site = _site_of_url(urls[0], experiment) or site
    elif kind == ActivityKind.NETWORK:
        host = given.get("host")
        if not isinstance(host, str) or not host.strip():
            problems.add("host", "host is required: the site's network host (name or address)")
        parameters["host"] = host
        parameters["port"] = _integer(problems, given, "port", 5201, low=1, high=65535)
        parameters["streams"] = _integer(problems, given, "streams", 1, low=1, high=128)
        parameters["duration"] = _integer(problems, given, "duration", 10, low=1, high=3600)
        reverse = given.get("reverse", False)
        if not isinstance(reverse, bool):
            problems.add("reverse", f"reverse must be true or false, not {reverse!r}")
        parameters["reverse"] = reverse
        deadline = (parameters["duration"] or 10) + 600
    elif kind == ActivityKind.CACHE:
        origin_urls = given.get("origin_urls")
        if not isinstance(origin_urls, list) or not origin_urls:
            problems.add("origin_urls", "origin_urls must be a non-empty list of file URLs at the origin")
            origin_urls = []
        parameters["origin_urls"] = [_url(problems, "origin_urls", url) for url in origin_urls]
        parameters["cache_url"] = _url(problems, "cache_url", given.get("cache_url"))
    elif kind == ActivityKind.IO:
        parameters["endpoint"] = _url(problems, "endpoint", given.get("endpoint"))
        default_size = activity.file_size if activity else None
        parameters["file_size"] = _integer(problems, given, "file_size", default_size, low=1, high=10**12)
        parameters["timeout"] = _integer(problems, given, "timeout", 300, low=1, high=86400)
        if isinstance(parameters["endpoint"], str):
            site = _site_of_url(parameters["endpoint"], experiment) or site
    else:
        problems.add("kind", f"runs of kind {kind} are not supported yet")
    if why_missing:
        problems.errors[wanted] = why_missing
    return RunPlan(parameters=parameters, files=[], site=site, experiment=experiment, deadline_seconds=deadline)


def run_plan(kind: str, activity: Activity | None, parameters: dict[str, Any]) -> RunPlan:
    """The checked parameters and files of a run of `kind` (of an activity, or ad hoc); ValidationError by field."""
    problems = _Problems()
    allowed = KIND_PARAMETERS.get(kind, set()) | COMMON_PARAMETERS
    for name in sorted(set(parameters) - allowed):
        problems.add("parameters", f"unknown parameter {name!r} for a {kind} run (known: {', '.join(sorted(allowed))})")
    # The experiment first: it decides which endpoints the plan may pick (those that serve it).
    experiment = activity.experiment if activity else None
    if "experiment" in parameters:
        experiment = Experiment.objects.filter(name__iexact=str(parameters["experiment"])).first()
        if experiment is None:
            problems.add("experiment", f"no experiment named {parameters['experiment']!r}")
    if kind in TRANSFER_KINDS:
        plan = _transfer_plan(kind, activity, parameters, problems, experiment)
    else:
        plan = _probe_plan(kind, activity, parameters, problems, experiment)
    if "max_duration" in parameters:
        seconds = _integer(problems, parameters, "max_duration", None, low=1, high=30 * 86400)
        plan.deadline_seconds = float(seconds or plan.deadline_seconds)
    problems.raise_any()
    return plan
