"""I/O runs (ActivityKind io): write a file of a given size to a disk endpoint, read it back, compare
(measure.io.io_probe). The plan gives an activity's run a disk endpoint of its sites (root:// first) and the
activity's file size. Its results: the write and read rates."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import plotly.graph_objects as go

from challenges.choices import ActivityKind
from common.units import size_text
from measure.context import ProbeContext
from measure.probes import io_run

from .base import Grants, ProbeResult, RunLink, RunParameters, SiteNaming
from .endpoints import activity_site_names, activity_sites, pick_endpoint, serving_note, site_of_url
from .fields import Problems, integer, url
from .figures import figure_json
from .one_task import OneTaskKind

if TYPE_CHECKING:
    from challenges.models import Activity
    from sites.models import Experiment, Site

    from ..models import Run


@dataclass(frozen=True, kw_only=True)
class IoParameters(RunParameters):
    """Write then read a `file_size`-byte file under `endpoint`/io-probe/, each within `timeout` seconds."""

    endpoint: str = ""
    file_size: int = 0
    timeout: int = 300

    @classmethod
    def check(cls, given: dict[str, Any], problems: Problems) -> dict[str, Any]:
        return {
            "endpoint": url(problems, "endpoint", given.get("endpoint")),
            "file_size": integer(problems, given, "file_size", None, low=1, high=10**12),
            "timeout": integer(problems, given, "timeout", 300, low=1, high=86400),
        }

    def list_columns(self) -> dict[str, Any]:
        return {**super().list_columns(), "file_size": self.file_size or None}


def io_figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Write versus read rate, side by side."""
    if result.get("write_rate") is None and result.get("read_rate") is None:
        return []
    figure = go.Figure(
        go.Bar(x=["write", "read"], y=[(result.get(name) or 0) / 1e9 for name in ("write_rate", "read_rate")])
    )
    figure.update_layout(
        height=280,
        margin={"l": 50, "r": 10, "t": 30, "b": 40},
        title={"text": "Write vs read"},
        yaxis={"title": {"text": "GB/s"}},
    )
    return [figure_json(figure)]


class IoKind(OneTaskKind[IoParameters]):
    name = "io"
    serves: ClassVar[tuple[str, ...]] = (ActivityKind.IO,)
    Parameters = IoParameters
    given = frozenset({"endpoint", "file_size", "timeout"})
    needs = "endpoint"
    columns = ("size", "write_rate", "read_rate")
    compared = "write_rate"

    def plan_defaults(
        self, activity: Activity, given: dict[str, Any], problems: Problems, experiment: Experiment | None
    ) -> dict[str, Any]:
        """A disk endpoint of the activity's sites, root:// first."""
        sites = activity_sites(activity)
        prefer = ("root", "davs", "https")
        endpoints = [e for site in sites if (e := pick_endpoint(site, prefer=prefer, experiment=experiment))]
        if not endpoints:
            problems.add(
                "endpoint",
                f"none of the activity's sites ({activity_site_names(sites)}) has a disk endpoint"
                f"{serving_note(experiment)}: give endpoint",
            )
            return {}
        return {"endpoint": endpoints[0].url}

    def given_defaults(self, activity: Activity | None) -> dict[str, Any]:
        return {"file_size": activity.file_size} if activity is not None else {}

    def planned(
        self, parameters: IoParameters, *, activity: Activity | None, experiment: Experiment | None
    ) -> tuple[Site | None, float]:
        site = activity.source if activity else None
        if isinstance(parameters.endpoint, str):
            site = site_of_url(parameters.endpoint, experiment) or site
        return site, 3600.0

    def grants(self, run: Run) -> Grants:
        """It writes (replacing) and reads its file under io-probe/."""
        return [(f"{self.parameters(run).endpoint.rstrip('/')}/io-probe/", "overwrite")]

    def probe(
        self, parameters: IoParameters, context: ProbeContext, grants: Grants, cancelled: threading.Event
    ) -> ProbeResult:
        return io_run(
            context,
            grants,
            cancelled,
            endpoint=parameters.endpoint,
            file_size=parameters.file_size,
            timeout=parameters.timeout,
        )

    def rows(self, run: Run, summary: dict[str, Any], *, match: Any) -> list[dict[str, Any]]:
        return [
            {
                "size": summary.get("size"),
                "write_rate": summary.get("write_rate"),
                "read_rate": summary.get("read_rate"),
            }
        ]

    def results(self, run: Run, summary: dict[str, Any]) -> dict[str, Any] | None:
        return {
            "kind": "io",
            "write_rate": summary.get("write_rate"),
            "read_rate": summary.get("read_rate"),
            "size": summary.get("size"),
            "endpoint": summary.get("endpoint_url"),
        }

    def figures(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        return io_figures(result)

    def describe(self, parameters: IoParameters) -> tuple[str, float | None]:
        return f"Writing then reading a {size_text(parameters.file_size or None)} file", None

    def target(self, parameters: IoParameters) -> str:
        return parameters.endpoint or parameters.site or ""

    def link(self, parameters: IoParameters, sites: SiteNaming) -> RunLink:
        if parameters.endpoint:
            return RunLink(sites.of_url(parameters.endpoint), parameters.endpoint)
        return RunLink(parameters.site or "", "")


IO = IoKind()
