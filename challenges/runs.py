"""Runs of probes: start, cancel, progress (the contract the API and the run page use), and the dispatch engine
the Celery tasks call (challenges/tasks.py stays thin).

A transfer run is a set of RunFile rows. The run keeps exactly C files in flight across all workers: whenever a
file ends (or a run starts, or the reaper frees a file), `_top_up` locks the run row, counts the files in flight
(running, or queued with a task already sent) and sends one task per missing slot, each for the next queued file
taken with SELECT ... FOR UPDATE SKIP LOCKED. A task first claims its file (queued -> running, only when the
file still carries that task's id and attempt), so a message delivered twice, or after the reaper gave its file
to another try, does nothing. Every try of every file ends as one results.TransferRecord (origin "probe",
origin_id run/file/attempt), stored with the file's new state in one transaction.

Workers refresh `RunFile.heartbeat` while they copy; the reaper (`runs_reap`, on Celery beat) turns a running
file whose heartbeat stopped into a failed try ("worker lost") and queues it again once, ends runs past their
deadline, and re-sends tasks whose message was lost (a broker restarted without its data).
"""

from __future__ import annotations

import contextlib
import logging
import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import (
    Case,
    Count,
    DateTimeField,
    F,
    PositiveBigIntegerField,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.utils import timezone

from results.choices import Origin, RecordState
from results.models import TransferRecord
from results.services import records_store
from sites.models import Experiment, Site, StorageEndpoint
from sites.roles import user_is_coordinator

from .choices import RUN_ENDED, ActivityKind, RunState
from .models import FILE_ENDED, Activity, FileState, Run, RunFile
from .probes.outcomes import FileOutcome
from .probes.testfiles import test_file_url

logger = logging.getLogger(__name__)

DEFAULT_QUEUE = "default"
TRANSFER_MODES = ("pull", "push", "streamed", "native")
CHECKSUMS = ("ADLER32", "MD5", "CRC32", "none")
MAX_ATTEMPTS = 2  # a file whose worker died is tried once more
HUNG_GRACE = 60.0  # seconds past its gfal2 timeout after which a copy still running is taken for hung
RATE_WINDOW = 60.0  # seconds: the aggregate rate of run_progress
DEFAULT_TIMEOUT = 300  # seconds a copy may take, at least
MIN_FILE_RATE = 5e6  # bytes/s: a copy's default timeout gives each file at least this rate
HTTP_SCHEMES = ("davs", "https", "dav", "http")
ROOT_SCHEMES = ("root", "roots", "xroot", "xroots")

# gfal2 plugin name (before the version) -> URL schemes it speaks
PLUGIN_SCHEMES: dict[str, tuple[str, ...]] = {
    "file": ("file",),
    "http": ("http", "https", "dav", "davs"),
    "xrootd": ("root", "xroot", "roots", "xroots"),
    "gridftp": ("gsiftp", "ftp"),
    "srm": ("srm",),
    "sftp": ("sftp",),
    "dcap": ("dcap", "gsidcap"),
    "mock": ("mock",),
}


# --- what the workers speak, where tasks go ---------------------------------------------------------------------


@cache
def worker_schemes() -> frozenset[str]:
    """URL schemes the workers' gfal2 can speak: the plugins gfal2 loads here (workers run this same image)."""
    from .probes.context import gfal2_context_new

    names = gfal2_context_new().get_plugin_names()
    schemes: set[str] = set()
    for name in names:
        schemes.update(PLUGIN_SCHEMES.get(str(name).split("-")[0].lower(), ()))
    return frozenset(schemes)


def site_queue(site_name: str) -> str:
    """The queue a worker at this site consumes: `celery -A portal worker -Q site.<SITE NAME>`."""
    return f"site.{site_name}"


SERVED_QUEUES_KEY = "portal:celery:served-queues"


def served_queues() -> set[str]:
    """Queues some live worker consumes (asked of the workers, remembered for 15 s)."""
    from django.core.cache import cache as django_cache

    cached = django_cache.get(SERVED_QUEUES_KEY)
    if cached is not None:
        return set(cached)
    from portal.celery import app

    replies = app.control.inspect(timeout=settings.DISPATCH_INSPECT_TIMEOUT).active_queues() or {}
    queues = {queue["name"] for worker_queues in replies.values() for queue in worker_queues}
    django_cache.set(SERVED_QUEUES_KEY, sorted(queues), timeout=15)
    return queues


def served_queues_forget() -> None:
    from django.core.cache import cache as django_cache

    django_cache.delete(SERVED_QUEUES_KEY)


def queue_for_site(site: Site | None) -> str:
    """`site.<NAME>` when a worker serves that site, else the default queue."""
    if site is not None:
        name = site_queue(site.name)
        if name in served_queues():
            return name
    return DEFAULT_QUEUE


def endpoint_for_url(url: str) -> StorageEndpoint | None:
    """The registered endpoint whose URL is the longest prefix of url (hosts alone are ambiguous on a testbed)."""
    parts = urlsplit(url)
    candidates = StorageEndpoint.objects.select_related("site").filter(
        scheme=parts.scheme.lower(), host=(parts.hostname or "").lower()
    )
    best: StorageEndpoint | None = None
    for endpoint in candidates:
        base = endpoint.url.rstrip("/")
        if (url == base or url.startswith(base + "/")) and (best is None or len(base) > len(best.url.rstrip("/"))):
            best = endpoint
    return best


# --- progress -------------------------------------------------------------------------------------------------------


@dataclass
class RunProgress:
    """A run's live figures. rate: bytes/s over the last 60 s (of the files that ended); eta_seconds None when
    unknown."""

    state: str
    message: str
    files_total: int
    files_done: int
    files_failed: int
    files_cancelled: int
    in_flight: int
    queued: int
    bytes_done: int
    bytes_in_flight: int  # copied so far by the copies in flight, as their workers last reported
    rate: float | None
    eta_seconds: float | None
    started_at: datetime | None
    finished_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in ("started_at", "finished_at"):
            data[name] = data[name].isoformat() if data[name] else None
        return data


def run_progress(run: Run) -> RunProgress:
    """Counts of the run's files by state, bytes moved, the aggregate rate over the last minute and an ETA."""
    now = timezone.now()
    counts = RunFile.objects.filter(run=run).aggregate(
        total=Count("id"),
        done=Count("id", filter=Q(state=FileState.DONE)),
        failed=Count("id", filter=Q(state=FileState.FAILED)),
        cancelled=Count("id", filter=Q(state=FileState.CANCELLED)),
        running=Count("id", filter=Q(state=FileState.RUNNING)),
        dispatched=Count("id", filter=Q(state=FileState.QUEUED) & ~Q(task_id="")),
        queued=Count("id", filter=Q(state=FileState.QUEUED)),
        bytes_done=Sum("bytes", filter=Q(state=FileState.DONE)),
        size_left=Sum("size", filter=Q(state__in=[FileState.QUEUED, FileState.RUNNING])),
    )
    if counts["total"] == 0:  # a run of one probe: its records are its files
        record_counts = TransferRecord.objects.filter(run=run).aggregate(
            total=Count("id"),
            done=Count("id", filter=Q(state=RecordState.OK)),
            failed=Count("id", filter=Q(state=RecordState.FAILED)),
            cancelled=Count("id", filter=Q(state=RecordState.CANCELLED)),
            bytes_done=Sum("bytes", filter=Q(state=RecordState.OK)),
        )
        counts.update(record_counts)
        counts.update(running=0, dispatched=0, queued=0, size_left=0)
    window_start = now - timedelta(seconds=RATE_WINDOW)
    if run.started_at:
        window_start = max(window_start, run.started_at)
    window = (now - window_start).total_seconds()
    rate: float | None = None
    in_flight_bytes = 0
    if window > 0 and run.started_at:
        # Each file's bytes spread over its real [start, end); a copy in flight counts what gfal2 last reported it
        # had copied, spread over [start, reported at), so that large files show a rate before the first one ends.
        spans = []
        recent = RunFile.objects.filter(
            Q(state=FileState.DONE, end__gt=window_start)
            | Q(state=FileState.RUNNING, progress_bytes__gt=0, progress_at__isnull=False),
            run=run,
        )
        for state, start, end, size, at, done in recent.values_list(
            "state", "start", "end", "bytes", "progress_at", "progress_bytes"
        ):
            if state == FileState.DONE:
                spans.append((start, end, size))
            else:
                in_flight_bytes += done
                if at is not None and at > window_start:
                    spans.append((start, at, done))
        moved = 0.0
        for start, end, size in spans:
            if start is None or end is None:
                continue
            seconds = (end - start).total_seconds()
            moved += size if seconds <= 0 else size * (end - max(start, window_start)).total_seconds() / seconds
        rate = moved / window
    left = max((counts["size_left"] or 0) - in_flight_bytes, 0)
    eta = left / rate if rate and left and run.state not in RUN_ENDED else None
    return RunProgress(
        state=run.state,
        message=run.message,
        files_total=counts["total"],
        files_done=counts["done"],
        files_failed=counts["failed"],
        files_cancelled=counts["cancelled"],
        in_flight=counts["running"] + counts["dispatched"],
        queued=counts["queued"] - counts["dispatched"],
        bytes_done=counts["bytes_done"] or 0,
        bytes_in_flight=in_flight_bytes,
        rate=rate,
        eta_seconds=eta,
        started_at=run.started_at,
        finished_at=run.finished_at,
    )


# --- parameters -----------------------------------------------------------------------------------------------------

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
        "checksum",
    },
    ActivityKind.STAGING: {"urls", "bulk_size", "pin_time", "timeout", "poll_interval"},
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


def _pick_endpoint(site: Site, *, prefer: Sequence[str], kind: str = "disk") -> StorageEndpoint | None:
    """The site's endpoint of this kind (disk, tape) that the workers speak, in the order of schemes `prefer`."""
    endpoints = [e for e in site.endpoints.all() if e.kind == kind and e.scheme in worker_schemes()]
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


def _activity_transfer_defaults(activity: Activity, copy_mode: str, problems: _Problems) -> dict[str, Any]:
    """source and destinations of an activity: its source site's endpoint and its targets' sites' endpoints."""
    defaults: dict[str, Any] = {}
    prefer = _scheme_preference(copy_mode)
    if activity.source is None:
        return defaults
    source = _pick_endpoint(activity.source, prefer=prefer)
    if source is None:
        problems.add("source", f"the source site {activity.source} has no disk endpoint the workers can speak")
        return defaults
    defaults["source"] = source.url
    destinations: list[str] = []
    for target in activity.targets.select_related("site", "link_to"):
        site = target.link_to if target.is_link else (target.site if target.direction == "in" else None)
        if site is None or site.pk == activity.source_id:
            continue
        kind = "tape" if activity.kind == ActivityKind.TAPE_WRITE else "disk"
        endpoint = _pick_endpoint(site, prefer=(source.scheme, *prefer), kind=kind)
        if endpoint is None:
            problems.add("destinations", f"{site} has no {kind} endpoint the workers can speak")
        elif endpoint.url not in destinations:
            destinations.append(endpoint.url)
    if destinations:
        defaults["destinations"] = destinations
    return defaults


@dataclass
class _Plan:
    """What run_start creates: the run's parameters and, for a transfer, its files."""

    parameters: dict[str, Any]
    files: list[tuple[str, str, int]]  # source URL, destination URL, size
    site: Site | None
    experiment: Experiment | None
    deadline_seconds: float


def _transfer_plan(activity: Activity | None, given: dict[str, Any], problems: _Problems) -> _Plan:
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
            defaults.update(_activity_transfer_defaults(activity, copy_mode, problems))
    merged = {**defaults, **{k: v for k, v in given.items() if v is not None}}
    streams = _integer(problems, merged, "streams", 1, low=1, high=64)
    timeout = _integer(problems, merged, "timeout", None, low=1, high=86400) if "timeout" in merged else None
    concurrency = _integer(problems, merged, "concurrency", 10, low=1, high=1000)
    checksum = merged.get("checksum", "ADLER32")
    if checksum not in CHECKSUMS:
        problems.add("checksum", f"checksum must be one of {', '.join(CHECKSUMS)}, not {checksum!r}")
    files: list[tuple[str, str, int]] = []
    source_url: str | None = None
    file_size = 0
    if "files" in merged:
        # Explicit pairs (ad hoc): each source already exists; sizes are learnt from the copies.
        entries = merged["files"]
        if not isinstance(entries, list) or not entries:
            problems.add("files", 'files must be a non-empty list of {"source": URL, "destination": URL}')
            entries = []
        for number, entry in enumerate(entries, start=1):
            if not isinstance(entry, dict) or set(entry) - {"source", "destination"}:
                problems.add("files", f'file {number}: give {{"source": URL, "destination": URL}}, not {entry!r}')
                continue
            source = _url(problems, "files", entry.get("source"))
            destination = _url(problems, "files", entry.get("destination"))
            if source and destination:
                files.append((source, destination, 0))
        source_url = files[0][0] if files else None
    else:
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
    mode_problem = _copy_mode_problem(copy_mode, files)
    if mode_problem:
        problems.add("copy_mode", mode_problem)
    if timeout is None:
        # Slow enough for a busy link: at least 5 MB/s per file (a 5 GB file gets 1000 s), never under 5 minutes.
        timeout = max(DEFAULT_TIMEOUT, math.ceil(max((size for _, _, size in files), default=0) / MIN_FILE_RATE))
    parameters = {
        "copy_mode": copy_mode,
        "streams": streams,
        "timeout": timeout,
        "concurrency": concurrency,
        "checksum": checksum,
    }
    if "files" not in merged:
        parameters.update(
            source=source_url,
            destinations=merged.get("destinations"),
            file_size=file_size,
            file_count=len(files),
        )
    source_endpoint = endpoint_for_url(source_url) if source_url else None
    rounds = math.ceil(len(files) / concurrency) if files and concurrency else 1
    return _Plan(
        parameters=parameters,
        files=files,
        site=source_endpoint.site if source_endpoint else (activity.source if activity else None),
        experiment=None,
        deadline_seconds=rounds * (timeout or 300) * 2 + 600,
    )


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


def _activity_probe_defaults(kind: str, activity: Activity, problems: _Problems) -> dict[str, Any]:
    """What a staging, network or io activity's run takes from the plan when it is not given, so that Run on the
    clock and auto-run work without typing URLs: network, the first of its sites' network hosts; io, a disk
    endpoint of its sites (root:// first) and the activity's file size; staging (a recall, A-DT), the files that
    this challenge's tape-write runs wrote to its sites' tape endpoints, the newest first, up to the activity's
    file count. A cache study needs origin files and a cache that the registry does not pair: give them."""
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
        if port.isdigit():
            defaults["port"] = int(port)
    elif kind == ActivityKind.IO:
        endpoints = [e for site in sites if (e := _pick_endpoint(site, prefer=("root", "davs", "https")))]
        if not endpoints:
            problems.add("endpoint", f"none of the activity's sites ({names}) has a disk endpoint: give endpoint")
            return defaults
        defaults["endpoint"] = endpoints[0].url
    elif kind == ActivityKind.STAGING:
        tape_urls = [e.url.rstrip("/") for site in sites for e in site.endpoints.all() if e.kind == "tape"]
        if not tape_urls:
            problems.add("urls", f"none of the activity's sites ({names}) has a tape endpoint: give urls")
            return defaults
        written = (
            RunFile.objects.filter(
                state=FileState.DONE,
                run__kind=ActivityKind.TAPE_WRITE,
                run__activity__challenge_id=activity.challenge_id,
            )
            .filter(_starts_with_any("destination_url", tape_urls))
            .order_by("-end", "-pk")
            .values_list("destination_url", flat=True)
        )
        urls = list(written[: activity.file_count] if activity.file_count else written)
        if not urls:
            problems.add(
                "urls",
                f"no tape-write run of this challenge has written files to the tape endpoints of {names}: "
                "run the tape-write (DT) activity first, or give urls",
            )
            return defaults
        defaults["urls"] = urls
    return defaults


def _starts_with_any(field: str, prefixes: Sequence[str]) -> Q:
    condition = Q()
    for prefix in prefixes:
        condition |= Q(**{f"{field}__startswith": prefix + "/"})
    return condition


def _probe_plan(kind: str, activity: Activity | None, given: dict[str, Any], problems: _Problems) -> _Plan:
    """Parameters of the one-task kinds (staging, network, cache, io), checked for type and range; an activity's
    run takes what is not given from the plan (`_activity_probe_defaults`)."""
    needs: dict[str, str] = {ActivityKind.NETWORK: "host", ActivityKind.IO: "endpoint", ActivityKind.STAGING: "urls"}
    wanted = needs.get(kind, "")
    why_missing: list[str] = []  # why the plan could not give it: said instead of the generic "required"
    if activity is not None and wanted and given.get(wanted) is None:
        given = {**_activity_probe_defaults(kind, activity, problems), **given}
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
        deadline = (parameters["timeout"] or 3600) + 600
        if urls and isinstance(urls[0], str) and (endpoint := endpoint_for_url(urls[0])):
            site = endpoint.site
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
        if isinstance(parameters["endpoint"], str) and (endpoint := endpoint_for_url(parameters["endpoint"])):
            site = endpoint.site
    else:
        problems.add("kind", f"runs of kind {kind} are not supported yet")
    if why_missing:
        problems.errors[wanted] = why_missing
    return _Plan(parameters=parameters, files=[], site=site, experiment=None, deadline_seconds=deadline)


def _plan(kind: str, activity: Activity | None, parameters: dict[str, Any]) -> _Plan:
    problems = _Problems()
    allowed = KIND_PARAMETERS.get(kind, set()) | COMMON_PARAMETERS
    for name in sorted(set(parameters) - allowed):
        problems.add("parameters", f"unknown parameter {name!r} for a {kind} run (known: {', '.join(sorted(allowed))})")
    if kind in TRANSFER_KINDS:
        plan = _transfer_plan(activity, parameters, problems)
    else:
        plan = _probe_plan(kind, activity, parameters, problems)
    experiment = activity.experiment if activity else None
    if "experiment" in parameters:
        experiment = Experiment.objects.filter(name__iexact=str(parameters["experiment"])).first()
        if experiment is None:
            problems.add("experiment", f"no experiment named {parameters['experiment']!r}")
    plan.experiment = experiment
    if "max_duration" in parameters:
        seconds = _integer(problems, parameters, "max_duration", None, low=1, high=30 * 86400)
        plan.deadline_seconds = float(seconds or plan.deadline_seconds)
    problems.raise_any()
    return plan


# --- start and cancel -----------------------------------------------------------------------------------------------


def run_start(
    *,
    user: Any,
    activity: Activity | None = None,
    kind: str | None = None,
    parameters: dict[str, Any] | None = None,
    trigger: str = "user",
) -> Run:
    """Start a run of an activity (its parameters the defaults of `parameters`) or an ad hoc run of `kind`.

    Coordinators only (PermissionDenied); ValidationError with per-field messages for bad parameters or an
    endpoint of a scheme the workers cannot speak, and then nothing is created. The tasks are sent once the
    transaction commits. `trigger="schedule"` is the clock's own start (no user)."""
    if trigger != "schedule" and not user_is_coordinator(user=user):
        raise PermissionDenied("Only coordinators start runs.")
    if activity is None and not kind:
        raise ValidationError({"kind": ["give an activity to run, or the kind of an ad hoc run"]})
    kind = kind or (activity.kind if activity else "")
    if activity is not None and kind != activity.kind:
        raise ValidationError({"kind": [f"the activity is a {activity.kind} activity, not {kind}"]})
    if kind not in KIND_PARAMETERS:
        raise ValidationError(
            {"kind": [f"runs of kind {kind!r} are not supported (known: {', '.join(KIND_PARAMETERS)})"]}
        )
    given = dict(parameters or {})
    plan = _plan(kind, activity, given)
    queue = queue_for_site(plan.site)
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            activity=activity,
            kind=kind,
            parameters={
                **plan.parameters,
                "queue": queue,
                "site": plan.site.name if plan.site else None,
                "experiment": plan.experiment.name if plan.experiment else None,
                "trigger": trigger,
            },
            created_by=user if getattr(user, "is_authenticated", False) else None,
            deadline=now + timedelta(seconds=plan.deadline_seconds),
        )
        if plan.files:
            RunFile.objects.bulk_create(
                [
                    RunFile(
                        run=run,
                        index=index,
                        source_url=source,
                        destination_url=destination.replace("{run}", f"run-{run.pk}"),
                        size=size,
                        queue=queue,
                    )
                    for index, (source, destination, size) in enumerate(plan.files)
                ]
            )
        transaction.on_commit(lambda: _send_prepare(run.pk, queue))
    return run


def _send_prepare(run_id: int, queue: str) -> None:
    from .tasks import run_prepare

    run_prepare.apply_async(args=(run_id,), queue=queue)


def run_cancel(run: Run, *, user: Any, message: str = "", system: bool = False) -> Run:
    """Cancel a run: its queued files are cancelled at once, copies in flight are aborted by their workers (which
    watch the run's state) and end as cancelled. Coordinators only; an ended run cannot be cancelled."""
    if not system and not user_is_coordinator(user=user):
        raise PermissionDenied("Only coordinators cancel runs.")
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.state in RUN_ENDED:
            raise ValidationError({"state": [f"the run has already ended ({locked.state})"]})
        now = timezone.now()
        locked.state = RunState.CANCELLED
        locked.finished_at = now
        who = getattr(user, "username", "") if user is not None else ""
        locked.message = message or (f"cancelled by {who}" if who else "cancelled")
        locked.save(update_fields=["state", "finished_at", "message"])
        RunFile.objects.filter(run=locked, state=FileState.QUEUED).update(
            state=FileState.CANCELLED, end=now, error="cancelled before it started", recorded=True
        )
    return locked


# --- the engine (called by challenges.tasks) -----------------------------------------------------------------------


def _send_file(file_id: int, attempt: int, task_id: str, queue: str) -> None:
    from .tasks import transfer_file_task

    transfer_file_task.apply_async(args=(file_id, attempt), task_id=task_id, queue=queue)


def _top_up(run: Run) -> None:
    """With the run row locked: send tasks for the next queued files until C are in flight; end the run when
    every file has ended."""
    if run.state not in (RunState.QUEUED, RunState.RUNNING):
        return
    concurrency = int(run.parameters.get("concurrency") or 1)
    files = RunFile.objects.filter(run=run)
    in_flight = files.filter(Q(state=FileState.RUNNING) | (Q(state=FileState.QUEUED) & ~Q(task_id=""))).count()
    free = concurrency - in_flight
    if free > 0:
        claimed = list(
            files.filter(state=FileState.QUEUED, task_id="")
            .order_by("index")
            .select_for_update(skip_locked=True)[:free]
        )
        now = timezone.now()
        for file in claimed:
            file.attempt += 1
            file.task_id = str(uuid.uuid4())
            file.dispatched_at = now
        RunFile.objects.bulk_update(claimed, ["attempt", "task_id", "dispatched_at"])
        for file in claimed:
            transaction.on_commit(
                lambda f=file: _send_file(f.pk, f.attempt, f.task_id, f.queue)  # type: ignore[misc]
            )
        in_flight += len(claimed)
    if in_flight == 0 and not files.filter(Q(state=FileState.QUEUED) | Q(recorded=False, attempt__gt=0)).exists():
        _run_end(run)


def _run_end(run: Run) -> None:
    counts = RunFile.objects.filter(run=run).aggregate(
        done=Count("id", filter=Q(state=FileState.DONE)),
        failed=Count("id", filter=Q(state=FileState.FAILED)),
        total=Count("id"),
    )
    run.state = RunState.FAILED if counts["total"] and counts["done"] == 0 else RunState.FINISHED
    run.finished_at = timezone.now()
    run.message = f"{counts['done']} of {counts['total']} files done, {counts['failed']} failed"
    run.save(update_fields=["state", "finished_at", "message"])


def run_prepare(run_id: int, *, ensure_test_file: Callable[[str, int], str]) -> None:
    """Start a transfer run: make sure its test file exists (once per endpoint and size), then send the first C
    tasks. A run whose test file cannot be made fails with gfal2's message."""
    run = Run.objects.get(pk=run_id)
    if run.state != RunState.QUEUED:
        return
    error = ""
    size = int(run.parameters.get("file_size") or 0)
    if run.parameters.get("source") and size:
        try:
            ensure_test_file(run.parameters["source"], size)
        except Exception as exc:  # gfal2.GError and friends: the run fails with the reason
            error = f"could not create the test file at {run.parameters['source']}: {getattr(exc, 'message', exc)}"
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.state != RunState.QUEUED:
            return
        run.started_at = timezone.now()
        if error:
            run.state, run.finished_at, run.message = RunState.FAILED, run.started_at, error
            RunFile.objects.filter(run=run, state=FileState.QUEUED).update(
                state=FileState.CANCELLED, end=run.started_at, error=error, recorded=True
            )
        else:
            run.state = RunState.RUNNING
        run.save(update_fields=["state", "started_at", "finished_at", "message"])
        _top_up(run)


def file_claim(file_id: int, attempt: int, task_id: str, worker: str) -> RunFile | None:
    """queued -> running for the task the file was sent with; None when this message is stale (a duplicate, a
    retry superseded it, or the run was cancelled)."""
    now = timezone.now()
    claimed = RunFile.objects.filter(
        pk=file_id, attempt=attempt, task_id=task_id, state=FileState.QUEUED, run__state=RunState.RUNNING
    ).update(
        state=FileState.RUNNING,
        worker=worker,
        heartbeat=now,
        start=now,
        end=None,
        error="",
        progress_bytes=0,
        progress_at=None,
    )
    if not claimed:
        return None
    return RunFile.objects.select_related("run", "run__activity").get(pk=file_id)


def _record(file: RunFile, outcome: FileOutcome, state: str, concurrency: int | None) -> TransferRecord:
    run = file.run
    source = endpoint_for_url(outcome.source_url)
    destination = endpoint_for_url(outcome.destination_url)
    experiment = run.activity.experiment if run.activity else None
    if experiment is None and run.parameters.get("experiment"):
        experiment = Experiment.objects.filter(name=run.parameters["experiment"]).first()
    return TransferRecord(
        experiment=experiment,
        source_site=source.site if source else None,
        destination_site=destination.site if destination else None,
        source_endpoint=source,
        destination_endpoint=destination,
        source_url=outcome.source_url,
        destination_url=outcome.destination_url,
        bytes=outcome.bytes if outcome.ok else 0,
        start=outcome.start,
        end=max(outcome.end, outcome.start),
        state=state,
        error_message=outcome.error,
        mode=outcome.mode[:16],
        concurrency=concurrency,
        origin=Origin.PROBE,
        origin_id=f"run{run.pk}-file{file.index}-try{file.attempt}",
        run=run,
        attempt=file.attempt,
    )


def file_finish(file_id: int, attempt: int, task_id: str, outcome: FileOutcome) -> bool:
    """End a try: the file's new state and the next file's task first (a short transaction, so the next copy
    starts at once), then the try's record, stored once. False when the file was taken from this try meanwhile
    (the reaper declared its worker lost): then nothing is stored. A worker that dies between the two leaves an
    ended file with recorded=False, which the reaper records from the file's own fields."""
    run_id = RunFile.objects.filter(pk=file_id).values_list("run_id", flat=True).first()
    if run_id is None:
        return False
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        file = (
            RunFile.objects.select_for_update()
            .filter(pk=file_id, attempt=attempt, task_id=task_id, state=FileState.RUNNING)
            .first()
        )
        if file is None:
            return False
        if outcome.ok:
            file.state = FileState.DONE
        elif run.state in RUN_ENDED and outcome.details.get("cancelled"):
            file.state = FileState.CANCELLED
        else:
            file.state = FileState.FAILED
        file.start, file.end = outcome.start, max(outcome.end, outcome.start)
        file.bytes = outcome.bytes if outcome.ok else 0
        file.mode = outcome.mode[:16]
        file.error = outcome.error
        file.recorded = False
        file.save(update_fields=["state", "start", "end", "bytes", "mode", "error", "recorded"])
        _top_up(run)
    files_record([file_id])
    return True


RECORD_STATES = {FileState.DONE: RecordState.OK, FileState.FAILED: RecordState.FAILED}


def files_record(file_ids: Sequence[int]) -> int:
    """Store the record of each ended, not yet recorded file (its last try), then end its run when that was the
    last one. Only the file row is locked while storing, so that other files' dispatch never waits for it;
    storing twice is harmless anyway (records_store keeps one record per origin_id)."""
    stored = 0
    runs_touched: set[int] = set()
    for file_id in file_ids:
        with transaction.atomic():
            file = (
                RunFile.objects.select_for_update(of=("self",))
                .select_related("run", "run__activity")
                .filter(pk=file_id, state__in=FILE_ENDED, recorded=False)
                .first()
            )
            if file is None:
                continue
            outcome = FileOutcome(
                file.source_url,
                file.destination_url,
                file.bytes,
                file.start or file.end or timezone.now(),
                file.end or timezone.now(),
                file.state == FileState.DONE,
                error=file.error,
                mode=file.mode,
            )
            state = RECORD_STATES.get(FileState(file.state), RecordState.CANCELLED)
            concurrency = int(file.run.parameters.get("concurrency") or 1)
            records_store(records=[_record(file, outcome, state, concurrency)])
            file.recorded = True
            file.save(update_fields=["recorded"])
            stored += 1
            runs_touched.add(file.run_id)
    for run_id in runs_touched:
        unfinished = Q(state__in=[FileState.QUEUED, FileState.RUNNING]) | Q(recorded=False, attempt__gt=0)
        if not RunFile.objects.filter(unfinished, run_id=run_id).exists():
            with transaction.atomic():
                _top_up(Run.objects.select_for_update().get(pk=run_id))
    return stored


def file_heartbeat(file_ids: Sequence[int], *, progress: dict[int, tuple[int, datetime]] | None = None) -> None:
    """The worker copying these files is alive, in one UPDATE; `progress` (file id -> bytes copied so far and when
    gfal2 reported them) feeds the live rate."""
    if not file_ids:
        return
    updates: dict[str, Any] = {"heartbeat": timezone.now()}
    if progress:
        updates["progress_bytes"] = Case(
            *[When(pk=pk, then=Value(done)) for pk, (done, _) in progress.items()],
            default=F("progress_bytes"),
            output_field=PositiveBigIntegerField(),
        )
        updates["progress_at"] = Case(
            *[When(pk=pk, then=Value(at)) for pk, (_, at) in progress.items()],
            default=F("progress_at"),
            output_field=DateTimeField(),
        )
    RunFile.objects.filter(pk__in=file_ids, state=FileState.RUNNING).update(**updates)


def runs_stopped(run_ids: Sequence[int]) -> set[int]:
    """Those of run_ids that ended (cancelled, or failed by the reaper): their copies in flight must stop."""
    if not run_ids:
        return set()
    return set(Run.objects.filter(pk__in=run_ids, state__in=RUN_ENDED).values_list("pk", flat=True))


def run_probe_store(run_id: int, outcomes: Sequence[FileOutcome], summary: dict[str, Any], error: str = "") -> None:
    """End a one-task run (staging, network, cache, io): its files as records, its summary on the run."""
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).select_related("activity").get(pk=run_id)
        if run.state in RUN_ENDED:
            return
        experiment = run.activity.experiment if run.activity else None
        if experiment is None and run.parameters.get("experiment"):
            experiment = Experiment.objects.filter(name=run.parameters["experiment"]).first()
        records = []
        for number, outcome in enumerate(outcomes):
            source = endpoint_for_url(outcome.source_url)
            destination = endpoint_for_url(outcome.destination_url)
            records.append(
                TransferRecord(
                    experiment=experiment,
                    source_site=source.site if source else None,
                    destination_site=destination.site if destination else None,
                    source_endpoint=source,
                    destination_endpoint=destination,
                    source_url=outcome.source_url,
                    destination_url=outcome.destination_url,
                    bytes=outcome.bytes if outcome.ok else 0,
                    start=outcome.start,
                    end=max(outcome.end, outcome.start),
                    state=RecordState.OK if outcome.ok else RecordState.FAILED,
                    error_message=outcome.error,
                    mode=outcome.mode[:16],
                    origin=Origin.PROBE,
                    origin_id=f"run{run.pk}-{run.kind}-{number}",
                    run=run,
                    attempt=1,
                )
            )
        records_store(records=records)
        failed = sum(1 for outcome in outcomes if not outcome.ok)
        run.summary = summary
        run.finished_at = timezone.now()
        if error:
            run.state, run.message = RunState.FAILED, error
        else:
            run.state = RunState.FINISHED
            run.message = f"{len(outcomes) - failed} of {len(outcomes)} files ok" if outcomes else "done"
        run.save(update_fields=["summary", "finished_at", "state", "message"])


def run_probe_begin(run_id: int) -> Run | None:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.state != RunState.QUEUED:
            return None
        run.state, run.started_at = RunState.RUNNING, timezone.now()
        run.save(update_fields=["state", "started_at"])
    return run


# --- the reaper and the clock ---------------------------------------------------------------------------------------


@dataclass
class ReapSummary:
    runs_failed: int = 0
    files_retried: int = 0
    files_failed: int = 0
    tasks_resent: int = 0
    records_stored: int = 0


def runs_reap(*, now: datetime | None = None) -> ReapSummary:
    """End runs past their deadline (failed), retry once (else fail) files whose worker stopped beating ("worker
    lost"), re-send tasks whose message never reached a worker, so that nothing stays running forever."""
    now = now or timezone.now()
    summary = ReapSummary()
    lost_after = timedelta(seconds=settings.DISPATCH_WORKER_LOST_AFTER)
    resend_after = timedelta(seconds=settings.DISPATCH_RESEND_AFTER)
    for run_id in Run.objects.filter(state__in=[RunState.QUEUED, RunState.RUNNING]).values_list("pk", flat=True):
        with transaction.atomic():
            run = (
                Run.objects.select_for_update().filter(pk=run_id, state__in=[RunState.QUEUED, RunState.RUNNING]).first()
            )
            if run is None:
                continue
            if run.deadline and run.deadline < now:
                run.state, run.finished_at = RunState.FAILED, now
                run.message = f"deadline passed ({run.deadline.isoformat()}): ended by the reaper"
                run.save(update_fields=["state", "finished_at", "message"])
                RunFile.objects.filter(run=run, state=FileState.QUEUED).update(
                    state=FileState.CANCELLED, end=now, error="the run's deadline passed", recorded=True
                )
                summary.runs_failed += 1
                continue
            if run.state == RunState.QUEUED:
                if run.created_at < now - resend_after:
                    transaction.on_commit(lambda r=run: _send_prepare(r.pk, r.parameters.get("queue", DEFAULT_QUEUE)))  # type: ignore[misc]
                    summary.tasks_resent += 1
                continue
            lost = list(
                RunFile.objects.select_for_update(of=("self",))
                .select_related("run", "run__activity")
                .filter(run=run, state=FileState.RUNNING, heartbeat__lt=now - lost_after)
            )
            records = []
            for file in lost:
                message = _lost_message(file, now)
                records.append(
                    _record(
                        file,
                        FileOutcome(file.source_url, file.destination_url, 0, file.start or now, now, False, message),
                        RecordState.FAILED,
                        int(run.parameters.get("concurrency") or 1),
                    )
                )
                if file.attempt < MAX_ATTEMPTS:
                    file.state, file.task_id, file.error = FileState.QUEUED, "", message
                    # The lost try's copy may live on at the destination server (a third-party copy is the
                    # server's): the next try writes a name of its own rather than race it.
                    file.destination_url = f"{file.destination_url.split('.try')[0]}.try{file.attempt + 1}"
                    summary.files_retried += 1
                else:
                    file.state, file.end, file.error = FileState.FAILED, now, message
                    summary.files_failed += 1
                file.recorded = True  # the lost try's record is the one stored here
                file.save(update_fields=["state", "task_id", "error", "end", "recorded", "destination_url"])
            if records:
                records_store(records=records)
            unsent = RunFile.objects.filter(
                run=run, state=FileState.QUEUED, dispatched_at__lt=now - resend_after
            ).exclude(task_id="")
            for file in unsent:
                transaction.on_commit(
                    lambda f=file: _send_file(f.pk, f.attempt, f.task_id, f.queue)  # type: ignore[misc]
                )
                summary.tasks_resent += 1
            unsent.update(dispatched_at=now)
            _top_up(run)
    summary.files_failed += _ended_runs_lost_files(now=now, lost_after=lost_after)
    # Tries that ended but whose worker died before storing their record.
    unrecorded = RunFile.objects.filter(state__in=FILE_ENDED, recorded=False, end__lt=now - timedelta(seconds=30))
    summary.records_stored = files_record(list(unrecorded.values_list("pk", flat=True)))
    return summary


def copy_deadline_seconds(parameters: dict[str, Any]) -> float:
    """How long a copy of a run with these parameters may run before it is taken for hung: its gfal2 timeout and a
    grace. Past it the worker stops the copy's heartbeat (gfal2 cannot always stop a hung XRootD copy) and the
    reaper ends the try."""
    return float(parameters.get("timeout") or DEFAULT_TIMEOUT) + HUNG_GRACE


def _lost_message(file: RunFile, now: datetime) -> str:
    if file.start and (now - file.start).total_seconds() > copy_deadline_seconds(file.run.parameters):
        return (
            f"timed out: try {file.attempt} was still running {int((now - file.start).total_seconds())} s after it "
            f"started, past its {int(file.run.parameters.get('timeout') or DEFAULT_TIMEOUT)} s timeout (a hung copy)"
        )
    return f"worker lost: {file.worker or 'its worker'} stopped answering during try {file.attempt}"


def _ended_runs_lost_files(*, now: datetime, lost_after: timedelta) -> int:
    """Files still running in runs that have ended (cancelled, or failed at their deadline) whose worker stopped
    answering: their copies will never report, so they end here (cancelled or failed) with their record."""
    ended = 0
    stale = RunFile.objects.filter(
        state=FileState.RUNNING, heartbeat__lt=now - lost_after, run__state__in=RUN_ENDED
    ).values_list("pk", flat=True)
    for file_id in list(stale):
        with transaction.atomic():
            file = (
                RunFile.objects.select_for_update(of=("self",))
                .select_related("run", "run__activity")
                .filter(pk=file_id, state=FileState.RUNNING, heartbeat__lt=now - lost_after)
                .first()
            )
            if file is None:
                continue
            message = f"{_lost_message(file, now)}, after its run ended ({file.run.state})"
            cancelled = file.run.state == RunState.CANCELLED
            state = RecordState.CANCELLED if cancelled else RecordState.FAILED
            records_store(
                records=[
                    _record(
                        file,
                        FileOutcome(file.source_url, file.destination_url, 0, file.start or now, now, False, message),
                        state,
                        int(file.run.parameters.get("concurrency") or 1),
                    )
                ]
            )
            file.state = FileState.CANCELLED if cancelled else FileState.FAILED
            file.end, file.error, file.recorded = now, message, True
            file.save(update_fields=["state", "end", "error", "recorded"])
            ended += 1
    return ended


def activities_auto_run(*, now: datetime | None = None) -> list[Run]:
    """The clock: start a run of every auto-run activity whose window is open and that has no scheduled run yet;
    cancel the scheduled runs of activities whose window has closed."""
    now = now or timezone.now()
    started: list[Run] = []
    open_activities = Activity.objects.filter(auto_run=True, start__lte=now, end__gt=now)
    for activity in open_activities.select_related("experiment", "source"):
        if activity.runs.filter(parameters__trigger="schedule", created_at__gte=activity.start).exists():
            continue
        try:
            run = run_start(user=None, activity=activity, trigger="schedule")
        except ValidationError as exc:
            # Kept as a failed run with the reason, on the activity's runs list: a warning in a log nobody reads
            # would leave the coordinator wondering why nothing ran, and the clock would retry every 30 s.
            reason = "; ".join(exc.messages)
            logger.warning("auto-run of activity %s refused: %s", activity.pk, reason)
            Run.objects.create(
                activity=activity,
                kind=activity.kind,
                state=RunState.FAILED,
                parameters={"trigger": "schedule", "experiment": activity.experiment.name},
                finished_at=now,
                message=f"the clock could not start this activity: {reason}",
            )
            continue
        Run.objects.filter(pk=run.pk).update(
            deadline=min(run.deadline or activity.end, activity.end + timedelta(minutes=5))
        )
        started.append(run)
    closing = Run.objects.filter(
        activity__auto_run=True, activity__end__lte=now, state__in=[RunState.QUEUED, RunState.RUNNING]
    )
    for run in closing:
        with contextlib.suppress(ValidationError):
            run_cancel(run, user=None, message="the activity's window closed", system=True)
    return started


def runs_active() -> QuerySet[Run]:
    return Run.objects.filter(state__in=[RunState.QUEUED, RunState.RUNNING])
