"""Transfer runs (ActivityKind transfer, e.g. the T0 export, and tape-write, DT): the per-file engine. The plan
makes C files of a test file from a source endpoint, round-robin to destination endpoints (an activity's source
and targets when not given; a tape write's destinations are the targets' tape endpoints, their disk buffers), or
explicit pairs; runs.engine keeps C copies in flight, each one task (runs.tasks.transfer_file_task) that calls
measure.transfer.transfer_file with `copy_options`. Each copy reads its source and writes its destination."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import urlsplit

from challenges.choices import ActivityKind
from measure.testfiles import test_file_url

from ..models import RunFile
from .base import OMIT_NONE, Grants, ProbeKind, RunLink, RunParameters, RunPlan, SiteNaming, joined
from .endpoints import HTTP_SCHEMES, ROOT_SCHEMES, pick_endpoint, serving_note, site_of_url
from .fields import Problems, boolean, choice, integer, url, urls

if TYPE_CHECKING:
    from challenges.models import Activity
    from sites.models import Experiment

    from ..models import Run

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


@dataclass(frozen=True, kw_only=True)
class TransferParameters(RunParameters):
    """A transfer run's parameters. A row from before the stall guard reads DEFAULT_STALL_TIMEOUT; concurrency 0:
    not stored (the engine then keeps one copy in flight). source, destinations, file_size and file_count are
    those of a planned run (an ad hoc run of explicit pairs has none)."""

    copy_mode: str = ""  # "": gfal2's choice
    streams: int = 1
    timeout: int = DEFAULT_TIMEOUT
    stall_timeout: int = DEFAULT_STALL_TIMEOUT  # 0: never stopped for a stall
    first_byte_timeout: int = 0  # 0: no limit
    concurrency: int = 0
    checksum: str = "ADLER32"
    keep_copies: bool = False
    source: str | None = field(default=None, metadata=OMIT_NONE)
    destinations: list[str] | None = field(default=None, metadata=OMIT_NONE)
    file_size: int | None = field(default=None, metadata=OMIT_NONE)
    file_count: int | None = field(default=None, metadata=OMIT_NONE)

    @classmethod
    def check(cls, given: dict[str, Any], problems: Problems) -> dict[str, Any]:
        """The fields given, each checked (those not given take their defaults)."""
        values: dict[str, Any] = {}
        if "copy_mode" in given:
            values["copy_mode"] = _copy_mode_of(given, None, problems)
        ranges = {
            "streams": (1, 64),
            "timeout": (1, 86400),
            "stall_timeout": (0, 86400),
            "first_byte_timeout": (0, 86400),
            "concurrency": (1, 1000),
            "file_size": (1, 10**13),
            "file_count": (1, 100_000),
        }
        for name, (low, high) in ranges.items():
            if name in given:
                values[name] = integer(problems, given, name, None, low=low, high=high)
        if "checksum" in given:
            values["checksum"] = choice(problems, given, "checksum", "ADLER32", allowed=CHECKSUMS)
        if "keep_copies" in given:
            values["keep_copies"] = boolean(problems, given, "keep_copies", False)
        if "source" in given:
            values["source"] = url(problems, "source", given["source"])
        if "destinations" in given:
            values["destinations"] = urls(problems, "destinations", given["destinations"], what="endpoint URLs")
        return values

    @property
    def keeps_copies(self) -> bool:
        """Its destination copies stay when it ends (tape writes keep theirs by default: the recalls read them)."""
        return self.keep_copies

    def copy_options(self) -> dict[str, Any]:
        """measure.transfer.transfer_file's options for each copy of the run."""
        return {
            "mode": self.copy_mode or None,
            "streams": self.streams or 1,
            "timeout": self.timeout or DEFAULT_TIMEOUT,
            "checksum": self.checksum or "ADLER32",
            "stall_timeout": self.stall_timeout,
            "first_byte_timeout": self.first_byte_timeout or 0,
        }

    def list_columns(self) -> dict[str, Any]:
        return {
            "mode": self.copy_mode or None,
            "concurrency": self.concurrency or None,
            "file_count": self.file_count,
            "file_size": self.file_size,
        }


def transfer_parameters(parameters: Mapping[str, Any] | TransferParameters) -> TransferParameters:
    """Typed transfer parameters, from a run's JSON (read leniently) or as they are."""
    return parameters if isinstance(parameters, TransferParameters) else TransferParameters.stored(parameters)


def copy_grants(source_url: str, destination_url: str, *, overwrite: bool = False) -> Grants:
    """A copy reads its source and writes its destination (and replaces what is there when it overwrites)."""
    return [(source_url, "read"), (destination_url, "overwrite" if overwrite else "write")]


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
    activity: Activity, copy_mode: str, problems: Problems, experiment: Experiment | None
) -> dict[str, Any]:
    """source and destinations of an activity: its source site's endpoint and its targets' sites' endpoints, those
    that serve the run's experiment."""
    defaults: dict[str, Any] = {}
    prefer = _scheme_preference(copy_mode)
    if activity.source is None:
        return defaults
    serving = serving_note(experiment)
    source = pick_endpoint(activity.source, prefer=prefer, experiment=experiment)
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
        endpoint = pick_endpoint(site, prefer=(*first, *prefer), kind=kind, experiment=experiment)
        if endpoint is None:
            problems.add("destinations", f"{site} has no {kind} endpoint{serving} the workers can speak")
        elif endpoint.url not in destinations:
            destinations.append(endpoint.url)
    if destinations:
        defaults["destinations"] = destinations
    return defaults


def _explicit_files(problems: Problems, entries: Any) -> list[tuple[str, str, int]]:
    """Explicit pairs of an ad hoc run: each source already exists; sizes are learnt from the copies."""
    files: list[tuple[str, str, int]] = []
    if not isinstance(entries, list) or not entries:
        problems.add("files", 'files must be a non-empty list of {"source": URL, "destination": URL}')
        return files
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or set(entry) - {"source", "destination"}:
            problems.add("files", f'file {number}: give {{"source": URL, "destination": URL}}, not {entry!r}')
            continue
        source = url(problems, "files", entry.get("source"))
        destination = url(problems, "files", entry.get("destination"))
        if source and destination:
            files.append((source, destination, 0))
    return files


def _planned_files(problems: Problems, merged: dict[str, Any]) -> tuple[list[tuple[str, str, int]], str | None, int]:
    """(files, source URL, file size) of a run of `file_count` copies of a test file from `source`, round-robin to
    `destinations`, each to `DEST/portal-runs/{run}/file-NNNNN` (the run's directory is named when it is made)."""
    files: list[tuple[str, str, int]] = []
    source_url: str | None = None
    file_size = integer(problems, merged, "file_size", None, low=1, high=10**13) or 0
    file_count = integer(problems, merged, "file_count", None, low=1, high=100_000) or 0
    if "source" not in merged:
        problems.add("source", "give the source endpoint URL (or run an activity that has a source site)")
    else:
        source_url = url(problems, "source", merged["source"])
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
    checked = [url(problems, "destinations", value) for value in destinations]
    if source_url and file_size and file_count and checked and all(checked):
        source_file = test_file_url(source_url, file_size)
        for index in range(file_count):
            base = str(checked[index % len(checked)]).rstrip("/")
            files.append((source_file, f"{base}/portal-runs/{{run}}/file-{index:05d}", file_size))
    return files, source_url, file_size


def copy_timeouts(problems: Problems, merged: dict[str, Any], *, largest: int, concurrency: int) -> dict[str, int]:
    """A run's `timeout`, `stall_timeout` and `first_byte_timeout` (seconds), as given or from its largest file."""
    given = {
        name: integer(problems, merged, name, None, low=low, high=86400) if name in merged else None
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


def _copy_mode_of(given: dict[str, Any], activity: Activity | None, problems: Problems) -> str:
    copy_mode = given.get("copy_mode", activity.copy_mode if activity else "") or ""
    if copy_mode not in ("", *TRANSFER_MODES):
        problems.add("copy_mode", f"copy_mode must be one of {', '.join(TRANSFER_MODES)} or blank, not {copy_mode!r}")
        copy_mode = ""
    return copy_mode


def _merged(
    activity: Activity | None, given: dict[str, Any], *, copy_mode: str, problems: Problems, experiment: Any
) -> dict[str, Any]:
    """What is given over what the activity plans (its file size and count, concurrency, source and targets)."""
    defaults: dict[str, Any] = {}
    if activity is not None:
        defaults = {
            "file_size": activity.file_size,
            "file_count": activity.file_count,
            "concurrency": activity.concurrency,
        }
        if "source" not in given or "destinations" not in given:
            defaults.update(_activity_transfer_defaults(activity, copy_mode, problems, experiment))
    return {**defaults, **{k: v for k, v in given.items() if v is not None}}


class TransferKind(ProbeKind[TransferParameters]):
    """The per-file engine: a transfer (T0 export ...) or a tape write (DT, to the targets' tape endpoints)."""

    name = "transfer"
    serves: ClassVar[tuple[str, ...]] = (ActivityKind.TRANSFER, ActivityKind.TAPE_WRITE)
    Parameters = TransferParameters
    given = frozenset(
        {
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
        }
    )
    per_file = True

    def plan(
        self, *, kind: str, activity: Activity | None, given: dict[str, Any], problems: Problems, experiment: Any
    ) -> RunPlan:
        copy_mode = _copy_mode_of(given, activity, problems)
        merged = _merged(activity, given, copy_mode=copy_mode, problems=problems, experiment=experiment)
        streams = integer(problems, merged, "streams", 1, low=1, high=64)
        concurrency = integer(problems, merged, "concurrency", 10, low=1, high=1000)
        # A tape write keeps its files by default: the recalls (A-DT) read them back.
        keep_copies = boolean(problems, merged, "keep_copies", kind == ActivityKind.TAPE_WRITE)
        checksum = choice(problems, merged, "checksum", "ADLER32", allowed=CHECKSUMS)
        if "files" in merged:
            files, file_size = _explicit_files(problems, merged["files"]), 0
            source_url = files[0][0] if files else None
        else:
            files, source_url, file_size = _planned_files(problems, merged)
        mode_problem = _copy_mode_problem(copy_mode, files)
        if mode_problem:
            problems.add("copy_mode", mode_problem)
        timeouts = copy_timeouts(
            problems, merged, largest=max((size for _, _, size in files), default=0), concurrency=concurrency or 0
        )
        explicit = "files" in merged  # explicit pairs: no source, destinations, file size nor count
        parameters = TransferParameters(
            copy_mode=copy_mode,
            streams=streams,  # type: ignore[arg-type]
            concurrency=concurrency,  # type: ignore[arg-type]
            checksum=checksum,
            keep_copies=keep_copies,
            timeout=timeouts["timeout"],
            stall_timeout=timeouts["stall_timeout"],
            first_byte_timeout=timeouts["first_byte_timeout"],
            source=None if explicit else source_url,
            destinations=None if explicit else merged.get("destinations"),
            file_size=None if explicit else file_size,
            file_count=None if explicit else len(files),
        )
        source_site = site_of_url(source_url, experiment) if source_url else None
        rounds = math.ceil(len(files) / concurrency) if files and concurrency else 1
        stored = parameters.to_dict()
        for name in ("queue", "site", "experiment", "trigger"):  # run_start adds these
            stored.pop(name)
        return RunPlan(
            parameters=stored,
            files=files,
            site=source_site or (activity.source if activity else None),
            experiment=experiment,
            deadline_seconds=rounds * timeouts["timeout"] * 2 + 600,
        )

    def grants(self, run: Run) -> Grants:
        """Each copy's: read its source, write its destination (by directory, each once)."""
        pairs = RunFile.objects.filter(run=run).values_list("source_url", "destination_url").distinct()
        grants: dict[tuple[str, str], None] = {}
        for source, destination in pairs:
            for grant in copy_grants(source, destination):
                grants[(grant[0].rsplit("/", 1)[0] + "/", grant[1])] = None
        return list(grants)

    def link(self, parameters: TransferParameters, sites: SiteNaming) -> RunLink:
        source = parameters.source or ""
        site = parameters.site or (sites.of_url(source) if source else "")
        if parameters.destinations:
            destinations = [str(item) for item in parameters.destinations]
            names = f"{site} -> {joined([sites.of_url(item) for item in destinations])}"
            return RunLink(names, f"{source} -> {', '.join(destinations)}")
        return RunLink(site, source)


TRANSFER = TransferKind()
