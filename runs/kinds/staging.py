"""Staging runs (ActivityKind staging: a tape recall, A-DT): bring files online from tape in bulk requests and
time each (measure.staging.stage_files). The plan gives an activity's run the files this challenge's tape writes
(DT) of the same experiment left on its sites' tape. Its results: per file its queue and stage time, time to first
file, files per hour, the tape rate against the site's drives, and the mounts."""

from __future__ import annotations

import dataclasses
import statistics
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

import plotly.graph_objects as go
from django.db.models import Q

from challenges.choices import ActivityKind
from measure.context import ProbeContext
from measure.outcomes import ONLINE_BEFORE, FileOutcome
from measure.probes import staging_run
from sites.matching import site_for_url

from ..choices import FileState
from ..dispatch import worker_schemes
from ..models import RunFile
from .base import OMIT_NONE, Grants, ProbeResult, RunLink, RunParameters, SiteNaming, joined
from .endpoints import (
    HTTP_SCHEMES,
    ROOT_SCHEMES,
    activity_site_names,
    activity_sites,
    serving,
    serving_note,
    site_of_url,
)
from .fields import Problems, integer, urls
from .figures import figure_json
from .one_task import OneTaskKind

if TYPE_CHECKING:
    from challenges.models import Activity
    from sites.models import Experiment, Site

    from ..models import Run


@dataclass(frozen=True, kw_only=True)
class StagingParameters(RunParameters):
    """The files to recall, in requests of `bulk_size`, pinned `pin_time` s, given up after `timeout` s, polled
    every `poll_interval` s; what the plan chose is kept too (the tape endpoint, the tape-write runs read back)."""

    urls: list[str] = field(default_factory=list)
    bulk_size: int = 1000
    pin_time: int = 3600
    timeout: int = 3600
    poll_interval: float = 2.0
    endpoint: str | None = field(default=None, metadata=OMIT_NONE)
    recall_run: int | None = field(default=None, metadata=OMIT_NONE)
    recalls_runs: list[int] | None = field(default=None, metadata=OMIT_NONE)

    @classmethod
    def check(cls, given: dict[str, Any], problems: Problems) -> dict[str, Any]:
        interval = given.get("poll_interval", 2.0)
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0.1 <= interval <= 600:
            problems.add("poll_interval", f"poll_interval must be seconds from 0.1 to 600, not {interval!r}")
        values = {
            "urls": urls(problems, "urls", given.get("urls"), what="file URLs on a tape endpoint"),
            "bulk_size": integer(problems, given, "bulk_size", 1000, low=1, high=1_000_000),
            "pin_time": integer(problems, given, "pin_time", 3600, low=1, high=10**7),
            "timeout": integer(problems, given, "timeout", 3600, low=1, high=10**6),
            "poll_interval": interval,
        }
        for name in ("endpoint", "recall_run", "recalls_runs"):  # what the plan chose, shown on the run page
            if given.get(name) is not None:
                values[name] = given[name]
        return values

    def recalled_runs(self) -> list[int]:
        return [pk for pk in self.recalls_runs or [] if isinstance(pk, int)]


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None


def staging_results(summary: dict[str, Any], *, tape_limit: float | None = None) -> dict[str, Any]:
    """Per file its queue and stage time; time to first file (first request to first file online); files per
    hour over the recall's span; the files that came from tape and those online already, and the tape rate, flagged
    when it is faster than the site's drives can read (tape_limit: drives x drive rate from the registry)."""
    files = summary.get("files") or []
    rows = [
        {
            "url": item.get("source_url"),
            "ok": item.get("ok"),
            "queue_seconds": (item.get("details") or {}).get("queue_seconds"),
            "stage_seconds": (item.get("details") or {}).get("stage_seconds"),
            "error": item.get("error"),
        }
        for item in files
    ]
    start = _time(summary.get("start"))
    ends = [moment for item in files if item.get("ok") and (moment := _time(item.get("end")))]
    first = (min(ends) - start).total_seconds() if start and ends else None
    seconds = summary.get("seconds") or 0
    tape_rate = summary.get("tape_rate")
    return {
        "files_from_tape": summary.get("files_from_tape"),
        "mounts": summary.get("mounts"),
        "files_already_online": summary.get("files_already_online"),
        "files_locality_unknown": summary.get("files_locality_unknown"),
        "tape_rate": tape_rate,
        "tape_limit": tape_limit,
        # 5 % above the drives' rate: more than timing noise; such a "recall" did not come from tape alone.
        "faster_than_drives": bool(tape_rate and tape_limit and tape_rate > tape_limit * 1.05),
        "files": rows,
        "staged": summary.get("staged", 0),
        "failed": summary.get("failed", 0),
        "time_to_first_file": first,
        "files_per_hour": summary.get("staged", 0) * 3600 / seconds if seconds else None,
        "requests": len(summary.get("requests") or []),
    }


def recalled_site(run: Run, match: Callable[[str], Site | None] = site_for_url) -> Site | None:
    """The site of the first file a recall reads (None: none, or no site registers it)."""
    files = STAGING.parameters(run).urls
    return match(str(files[0])) if files else None


def staging_tape_limit(run: Run, match: Callable[[str], Site | None] = site_for_url) -> float | None:
    """All drives of the recalled endpoint's site together (bytes per second), from the registry; None unknown.
    `match`: how a URL finds its site (sites.matching.site_matcher for many runs)."""
    site = recalled_site(run, match)
    capacity = getattr(site, "capacity", None) if site is not None else None
    return capacity.tape_rate if capacity is not None else None


def staging_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per file: the time it waited in the queue and the time it took to come online, stacked."""
    files = [file for file in result.get("files") or [] if file.get("queue_seconds") is not None]
    if not files:
        return []
    names = [str(file.get("url") or "").rsplit("/", 1)[-1] or str(index) for index, file in enumerate(files)]
    figure = go.Figure(
        [
            go.Bar(x=names, y=[file["queue_seconds"] for file in files], name="queue"),
            go.Bar(x=names, y=[file.get("stage_seconds") or 0 for file in files], name="stage"),
        ]
    )
    figure.update_layout(
        barmode="stack",
        height=320,
        margin={"l": 50, "r": 10, "t": 30, "b": 80},
        title={"text": "Per file: queue and stage time"},
        yaxis={"title": {"text": "seconds"}},
    )
    return [figure_json(figure)]


def _median(values: Iterable[Any]) -> float | None:
    numbers = [float(value) for value in values if isinstance(value, int | float)]
    return statistics.median(numbers) if numbers else None


def _through_door(url: str, doors: Sequence[str], door: str) -> str:
    """The URL of the same file through another door of the same storage (root://h:1//data/f -> davs://h:2/data/f)."""
    for base in sorted(doors, key=len, reverse=True):
        if url.startswith(base + "/"):
            return door + url[len(base) :]
    return url


def _starts_with_any(name: str, prefixes: Sequence[str]) -> Q:
    condition = Q()
    for prefix in prefixes:
        condition |= Q(**{f"{name}__startswith": prefix + "/"})
    return condition


def _recall_defaults(
    activity: Activity, given: dict[str, Any], problems: Problems, *, experiment: Experiment | None
) -> dict[str, Any]:
    """The files an A-DT run recalls: those the tape-write (DT) runs of this challenge and this experiment wrote
    to the tape of its sites, newest first, up to the activity's file count, or those of one DT run
    (`recall_run`); each through the tape endpoint the run names (`endpoint`), else the site's Tape REST door
    (davs/https), else its root:// prepare door, whatever door wrote it (the same tape behind every door)."""
    sites = activity_sites(activity)
    names = activity_site_names(sites)
    spoken = [e for site in sites for e in site.endpoints.all() if e.kind == "tape" and e.scheme in worker_schemes()]
    tape = serving(spoken, experiment)
    if not tape:
        problems.add(
            "urls", f"none of the activity's sites ({names}) has a tape endpoint{serving_note(experiment)}: give urls"
        )
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
        problems.add(
            "recall_run" if recall_run is not None else "urls",
            f"{whose} has written files to the tape of {through.site}: "
            "run the tape-write (DT) activity first, or give urls",
        )
        return {}
    return {
        "urls": [_through_door(url, doors, through.url.rstrip("/")) for url, _ in rows],
        "endpoint": through.url,
        "recalls_runs": sorted({run_id for _, run_id in rows}),
    }


class StagingKind(OneTaskKind[StagingParameters]):
    name = "staging"
    serves: ClassVar[tuple[str, ...]] = (ActivityKind.STAGING,)
    Parameters = StagingParameters
    given = frozenset({"urls", "bulk_size", "pin_time", "timeout", "poll_interval", "endpoint", "recall_run"})
    needs = "urls"
    columns = (
        "files",
        "staged",
        "failed",
        "requests",
        "time_to_first_file",
        "files_per_hour",
        "median_queue_seconds",
        "median_stage_seconds",
        "files_from_tape",
        "files_already_online",
        "mounts",
        "tape_rate",
        "tape_limit",
        "faster_than_drives",
    )
    compared = "files_per_hour"

    def plan_defaults(
        self, activity: Activity, given: dict[str, Any], problems: Problems, experiment: Experiment | None
    ) -> dict[str, Any]:
        return _recall_defaults(activity, given, problems, experiment=experiment)

    def planned(
        self, parameters: StagingParameters, *, activity: Activity | None, experiment: Experiment | None
    ) -> tuple[Site | None, float]:
        site = activity.source if activity else None
        if parameters.urls and isinstance(parameters.urls[0], str):
            site = site_of_url(parameters.urls[0], experiment) or site
        return site, (parameters.timeout or 3600) + 600

    def grants(self, run: Run) -> Grants:
        """It stages each file (and releases it)."""
        return [(item, "stage") for item in self.parameters(run).urls]

    def probe(
        self, parameters: StagingParameters, context: ProbeContext, grants: Grants, cancelled: threading.Event
    ) -> ProbeResult:
        return staging_run(
            context,
            grants,
            cancelled,
            urls=parameters.urls,
            bulk_size=parameters.bulk_size,
            pin_time=parameters.pin_time,
            timeout=parameters.timeout,
            poll_interval=parameters.poll_interval,
        )

    def counted(self, run: Run, outcome: FileOutcome) -> FileOutcome:
        """A recall's file that was online already was not brought online by the recall: it counts no bytes for
        the A-DT targets (it stays a staged file on the run page and in the Tape Challenge table's "online
        already")."""
        if outcome.details.get("locality_before") in ONLINE_BEFORE:
            return dataclasses.replace(outcome, bytes=0)
        return outcome

    def rows(self, run: Run, summary: dict[str, Any], *, match: Any) -> list[dict[str, Any]]:
        result = staging_results(summary, tape_limit=staging_tape_limit(run, match))
        return [
            {
                "files": len(result["files"]),
                "staged": result["staged"],
                "failed": result["failed"],
                "requests": result["requests"],
                "time_to_first_file": result["time_to_first_file"],
                "files_per_hour": result["files_per_hour"],
                "median_queue_seconds": _median(file["queue_seconds"] for file in result["files"]),
                "median_stage_seconds": _median(file["stage_seconds"] for file in result["files"]),
                **{name: result[name] for name in self.columns[8:]},
            }
        ]

    def results(self, run: Run, summary: dict[str, Any]) -> dict[str, Any] | None:
        return {"kind": "staging", **staging_results(summary, tape_limit=staging_tape_limit(run))}

    def figures(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        return staging_figures(result)

    def describe(self, parameters: StagingParameters) -> tuple[str, float | None]:
        count = len(parameters.urls)
        return f"Recalling {count} file{'s' if count != 1 else ''} from tape", None

    def target(self, parameters: StagingParameters) -> str:
        if parameters.endpoint or parameters.site:
            return str(parameters.endpoint or parameters.site)
        return str(parameters.urls[0]).rsplit("/", 1)[0] if parameters.urls else ""

    def link(self, parameters: StagingParameters, sites: SiteNaming) -> RunLink:
        if parameters.endpoint:
            return RunLink(sites.of_url(parameters.endpoint), parameters.endpoint)
        files = [str(item) for item in parameters.urls]
        if not files:
            return RunLink(parameters.site or "", "")
        where = files[0].rsplit("/", 1)[0]
        count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
        return RunLink(joined([sites.of_url(item) for item in files]), f"{count} under {where}/")


STAGING = StagingKind()
